// Your own machine with `defineMachine`: a support ticket with zod schemas, a guarded row, a
// context update and a typed rune payload, hosted by the engine beside the built-in machines.
//
//   npm run example -- examples/custom-machine.ts
import assert from 'node:assert/strict';
import { z } from 'zod';
import { createEngine, defineMachine, machines } from 'runestream';

const TicketState = z.object({
  value: z.enum(['open', 'assigned', 'resolved', 'closed']),
  title: z.string(),
  assignee: z.string().optional(),
  reopened: z.number().int(),
});
type TicketState = z.infer<typeof TicketState>;

const TicketEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('assign'), to: z.string().min(1) }),
  z.object({ type: z.literal('resolve'), note: z.string() }),
  z.object({ type: z.literal('reopen') }),
  z.object({ type: z.literal('close') }),
]);
type TicketEvent = z.infer<typeof TicketEvent>;

/** The payload of a `ticket.resolved` rune: readers of the log need no fold to know who resolved it. */
const Resolved = z.object({ assignee: z.string(), note: z.string() });

const ticket = defineMachine<TicketState, TicketEvent, { title: string }, { 'ticket.resolved': typeof Resolved }>({
  id: 'ticket', // kebab-case, stored with every rune
  states: ['open', 'assigned', 'resolved', 'closed'], // the initial state first
  terminal: ['closed'], // a closed ticket takes no event at all
  events: ['assign', 'resolve', 'reopen', 'close'],
  schemas: { state: TicketState, event: TicketEvent, input: z.object({ title: z.string().min(1) }) },
  initial: ({ title }) => ({ value: 'open', title, reopened: 0 }),
  payloads: { 'ticket.resolved': Resolved },
  table: [
    { from: ['open', 'assigned'], on: 'assign', to: 'assigned', assign: (_, e) => ({ assignee: e.to }) },
    {
      from: 'assigned',
      on: 'resolve',
      to: 'resolved',
      kind: 'ticket.resolved',
      payload: (s, e) => ({ assignee: s.assignee ?? '', note: e.note }),
    },
    // A guard, and its label: the label is in the diagram and in the rejection's reason.
    { from: 'resolved', on: 'reopen', to: 'assigned', when: (s) => s.reopened < 2, label: 'reopened < 2', assign: (s) => ({ reopened: s.reopened + 1 }) },
    { from: '*', on: 'close', to: 'closed' },
  ],
});
// The machine alone is a pure reducer.
const assigned = ticket.transition(ticket.initial({ title: 'Login fails' }), { type: 'assign', to: 'ana' });
console.log(assigned); // Logs: { value: 'assigned', title: 'Login fails', reopened: 0, assignee: 'ana' }

// In an engine: add it to the machines it hosts, by id.
const engine = createEngine({ machines: { ...machines, ticket } });
await engine.spawn('ticket/42', 'ticket', { title: 'Login fails' });
await engine.dispatch('ticket/42', { type: 'assign', to: 'ana' });
const resolved = await engine.dispatch('ticket/42', { type: 'resolve', note: 'cleared the session cache' });
assert.ok(resolved.accepted);
console.log(resolved.rune.kind, resolved.rune.payload); // Logs: ticket.resolved { assignee: 'ana', note: 'cleared the session cache' }

// Bad input is refused with a stable code and a reason; the stream goes on.
const bad = await engine.dispatch('ticket/42', { type: 'assign', to: '' });
assert.ok(!bad.accepted);
console.log(bad.code); // Logs: invalid_event
await engine.dispatch('ticket/42', { type: 'close' });
const late = await engine.dispatch('ticket/42', { type: 'reopen' });
assert.ok(!late.accepted);
console.log(late.code); // Logs: terminal_state

// Its diagram, generated from the table.
console.log(ticket.toMermaid().split('\n')[0]); // Logs: stateDiagram-v2
await engine.close();
