import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  agentLifecycle,
  autonomyLoop,
  chatActor,
  conversation,
  createEngine,
  defineMachine,
  edgesOf,
  machines,
  toolCall,
  turnEngine,
  type AnyMachine,
  type TableMachine,
} from '../../src/index.js';
import { runeEventSchemas, runePayloadSchemas } from '../../src/reducers/rune-payloads.js';

const tableMachines = Object.values(machines as Record<string, AnyMachine>).filter((m): m is TableMachine<any, any, any, any> => 'table' in m);

describe('runeEventSchemas: a schema per rune kind for its event, from the table', () => {
  it('groups the events of a seed kind: tool.result is any outcome of a call, and nothing else', () => {
    const events = runeEventSchemas(toolCall);
    const result = events['tool.result']!;
    for (const outcome of [{ type: 'success', output: 3 }, { type: 'execution_error', error: 'x' }, { type: 'cancelled' }, { type: 'approval_timeout' }]) {
      expect(result.safeParse(outcome).success, outcome.type).toBe(true);
    }
    expect(result.safeParse({ type: 'approved' }).success).toBe(false);
    expect(events['tool.denied']!.safeParse({ type: 'denied', reason: 'no' }).success).toBe(true);
    expect(result.safeParse({ type: 'success' }).success).toBe(false); // the event's own fields are checked
  });

  it("the spawn kind carries the machine's input", () => {
    const spawn = runeEventSchemas(toolCall)[toolCall.spawnKind]!;
    expect(spawn.safeParse({ type: 'spawn', input: { callId: 'c', toolName: 't', arguments: {} } }).success).toBe(true);
    expect(spawn.safeParse({ type: 'spawn', input: { callId: 'c' } }).success).toBe(false);
    expect(spawn.safeParse({ type: 'spawn' }).success).toBe(false);
  });

  it('the spawn of a machine without input is read back from JSON, where it has no `input` key', () => {
    const spawn = runeEventSchemas(chatActor)[chatActor.spawnKind]!;
    expect([spawn.safeParse({ type: 'spawn' }).success, spawn.safeParse({ type: 'spawn', input: undefined }).success]).toEqual([true, true]);
    expect(spawn.safeParse({ type: 'spawn', input: 'x' }).success).toBe(false);
  });

  it.each(tableMachines.map((m) => [m.id, m] as const))('%s: every event type has a kind, and every kind a schema', (_id, machine) => {
    const events = runeEventSchemas(machine);
    const kindsOfTypes = new Set(machine.table.map((row: { kind?: string; on: string }) => row.kind ?? row.on));
    for (const kind of kindsOfTypes) expect(events[kind], kind).toBeDefined();
    expect(Object.keys(events)).toContain(machine.spawnKind);
  });

  it('every rune an engine appends parses with the schema of its kind', async () => {
    const engine = createEngine();
    await engine.spawn('chat-1', chatActor);
    await engine.dispatch('chat-1', { type: 'ProcessInteraction', userId: '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21' });
    await engine.dispatch('chat-1', { type: 'Pause', reason: 'lunch' });
    await engine.spawn('conv/c/agent/a/turn', turnEngine);
    await engine.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'hi' });
    await engine.dispatch('conv/c/agent/a/turn', { type: 'assistant_delta', content: 'Hel' });
    await engine.dispatch('conv/c/agent/a/turn', { type: 'interrupt', reason: 'stop' });
    for (const [stream, machine] of [
      ['chat-1', chatActor],
      ['conv/c/agent/a/turn', turnEngine],
    ] as const) {
      const events: Readonly<Record<string, z.ZodType>> = runeEventSchemas(machine as TableMachine<any, any, any, any>);
      const runes = await new Promise<{ kind: string; event: unknown }[]>((resolve) => {
        const seen: { kind: string; event: unknown }[] = [];
        engine.runes$(stream).subscribe((rune) => {
          seen.push(rune);
          if (seen.length === (stream === 'chat-1' ? 3 : 4)) resolve(seen);
        });
      });
      for (const rune of runes) expect(events[rune.kind]?.safeParse(rune.event).success, `${stream} ${rune.kind}`).toBe(true);
    }
    await engine.close();
  });
});

describe("runePayloadSchemas: the machine's payload schema per rune kind", () => {
  /** Seed 003's rune kinds are namespaced (`turn.`, `tool.`, ...); the other kinds are event types. */
  const seedKinds = (machine: TableMachine<any, any, any, any>): Set<string> =>
    new Set([machine.spawnKind, ...edgesOf(machine).map((edge) => edge.kind)].filter((kind) => kind.includes('.')));

  it.each([turnEngine, toolCall, conversation, agentLifecycle, autonomyLoop].map((m) => [m.id, m as TableMachine<any, any, any, any>] as const))(
    '%s: every seed kind it appends has a payload schema, and nothing else has one',
    (_id, machine) => {
      expect(new Set(Object.keys(runePayloadSchemas(machine)))).toEqual(seedKinds(machine));
    },
  );

  it('is typed per kind', () => {
    const result = runePayloadSchemas(toolCall)['tool.result'];
    const parsed = result.parse({ callId: 'c1', status: 'error', error: 'boom' });
    // The discriminated union narrows by status: `error` exists only on the error member.
    expect(parsed.status === 'error' ? parsed.error : undefined).toBe('boom');
    expect(result.safeParse({ callId: 'c1', status: 'lost' }).success).toBe(false);
  });

  it('is empty for a machine whose runes carry no payload', () => {
    expect(runePayloadSchemas(chatActor)).toEqual({});
  });

  describe('defineMachine refuses a table whose runes of a kind would carry a payload only sometimes', () => {
    const State = z.object({ value: z.enum(['a', 'b']) });
    const Event = z.discriminatedUnion('type', [z.object({ type: z.literal('go') }), z.object({ type: z.literal('back') })]);
    const base = {
      id: 'ab',
      states: ['a', 'b'] as const,
      terminal: [],
      events: ['go', 'back'] as const,
      schemas: { state: State, event: Event, input: z.void() },
      initial: () => ({ value: 'a' as const }),
    };

    it('a row of a kind with a schema but no payload, and one with a payload but no schema', () => {
      expect(() =>
        defineMachine({
          ...base,
          payloads: { moved: z.object({ to: z.string() }) },
          table: [
            { from: 'a', on: 'go', to: 'b', kind: 'moved', payload: (_, __, after) => ({ to: after.value }) },
            { from: 'b', on: 'back', to: 'a', kind: 'moved' },
          ],
        }),
      ).toThrow('machine "ab" has an invalid table:\n- row back: kind "moved" has a payload schema, so the row must give payload');
      expect(() =>
        defineMachine({
          ...base,
          table: [{ from: 'a', on: 'go', to: 'b', kind: 'moved', payload: () => ({}) } as never],
        }),
      ).toThrow('- row go: kind "moved" has no payload schema');
    });

    it('a spawn kind with a schema but no spawnPayload', () => {
      expect(() => defineMachine({ ...base, spawnKind: 'ab.created', payloads: { 'ab.created': z.object({}) }, table: [] })).toThrow(
        '- spawn kind "ab.created": give both its payload schema and spawnPayload, or neither',
      );
    });
  });
});
