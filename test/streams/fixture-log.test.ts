import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rune, checkInvariants, createEngine, foldRune, runeEventSchemas, runePayloadSchemas, type AnyMachine, type Engine, type StreamHead } from '../../src/index.js';
import type { TableMachine } from '../../src/reducers/table.js';
import { sqliteStore } from '../../src/sqlite.js';
import type { RuneStore } from '../../src/streams/store.js';

/**
 * A log written by an older runestream stays readable: test/fixtures/logs/main-2026-11-27.db was
 * written by scripts/fixture-log.ts with the code of that day (see the folder's README). Every
 * stream in it is read back and folded by its machine as the code is now; a change that makes an
 * old log unreadable (a machine that no longer accepts a stored event, a schema a stored state
 * no longer passes, a store that cannot open the file) fails here. The committed file is only
 * ever copied: the store opens its copy, in a temp dir.
 */
const FIXTURE = fileURLToPath(new URL('../fixtures/logs/main-2026-11-27.db', import.meta.url));

/** One stream of the log: its head, its runes, and the state they fold to. */
interface StreamLog {
  readonly head: StreamHead;
  readonly machine: AnyMachine;
  readonly runes: Rune[];
  /** The state after each rune, `states[i]` after `runes[i]`. */
  readonly states: unknown[];
}

let dir: string;
let store: RuneStore;
let engine: Engine;
const logs: StreamLog[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'runestream-fixture-log-'));
  const copy = join(dir, 'log.db');
  copyFileSync(FIXTURE, copy);
  store = sqliteStore(copy);
  engine = createEngine({ store });
  for await (const head of store.heads()) {
    const machine = engine.machines[head.machine];
    if (machine === undefined) throw new Error(`stream "${head.stream}" is of machine "${head.machine}", which this engine does not host`);
    const runes = (await store.read(head.stream)) as Rune[];
    const states: unknown[] = [];
    let state: unknown;
    for (const rune of runes) states.push((state = foldRune(machine, state, rune.seq, rune.event)));
    logs.push({ head, machine, runes, states });
  }
});

afterAll(async () => {
  await engine?.close(); // closes the store
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const logOf = (stream: string): StreamLog => {
  const log = logs.find((each) => each.head.stream === stream);
  if (log === undefined) throw new Error(`the fixture has no stream "${stream}"`);
  return log;
};
/**
 * State fields each machine has gained since the fixture was written (optional, additive): its
 * stored snapshots lack them, and so does a state hydrated from one until the runes after it
 * rebuild them (a turn's `messages` at its next model call).
 */
const ADDED_SINCE: Readonly<Record<string, readonly string[]>> = { 'turn-engine': ['messages'] };
/** `state` without the fields its machine gained since the fixture that `as` lacks. */
const withoutAdded = (machine: string, state: unknown, as: unknown = {}): unknown =>
  Object.fromEntries(Object.entries(state as object).filter(([key]) => !(ADDED_SINCE[machine] ?? []).includes(key) || Object.hasOwn(as as object, key)));
/** `state` with its machine's internal transition taken, if it is in a state that has one (`counted` called then). */
const landedOf = (machine: AnyMachine, state: unknown, counted: () => void): unknown => {
  const value = valueOf(state);
  if (!isTableMachine(machine) || typeof value !== 'string' || machine.internal[value] === undefined) return state;
  counted();
  return { ...(state as object), value: machine.internal[value] };
};
const kindsOf = (stream: string): string[] => logOf(stream).runes.map((rune) => rune.kind);
const valueOf = (state: unknown): unknown => (state as { value?: unknown }).value;
const isTableMachine = (machine: AnyMachine): machine is AnyMachine & TableMachine<{ value: string }, { type: string }, unknown, never> => 'payloads' in machine;

describe('the fixture log of 2026-11-27', () => {
  it('is committed whole: no -wal or -shm beside it', () => {
    expect(existsSync(FIXTURE)).toBe(true);
    expect([existsSync(`${FIXTURE}-wal`), existsSync(`${FIXTURE}-shm`)]).toEqual([false, false]);
  });

  it('holds what it claims: a conversation of several agents, approved and denied tool calls, a plan at goal_met, a ReAct agent, a chat, a CLI session, provider breakers', () => {
    expect(Object.fromEntries(logs.map(({ head }) => [head.stream, `${head.machine} ${head.value ?? '-'} ${head.seq}`]))).toEqual({
      'chat/lobby': 'conversation active 6',
      'chat/lobby/actor/1': 'chat-actor cancelled 4',
      'chat/lobby/actor/2': 'chat-actor idle 3',
      'chat/lobby/agent/assistant': 'agent-lifecycle idle 6',
      'chat/lobby/agent/assistant/turn': 'turn-engine idle 13',
      'conv/team': 'conversation active 12',
      'conv/team/agent/calc': 'agent-lifecycle idle 4',
      'conv/team/agent/calc/react': 'react-agent - 10',
      'conv/team/agent/lead': 'agent-lifecycle idle 4',
      'conv/team/agent/lead.d1': 'agent-lifecycle idle 4',
      'conv/team/agent/lead.d1/call/l1': 'tool-call completed_result 4',
      'conv/team/agent/lead.d1/turn': 'turn-engine idle 8',
      'conv/team/agent/lead/call/d1': 'tool-call completed_result 4',
      'conv/team/agent/lead/call/n1': 'tool-call completed_result 5',
      'conv/team/agent/lead/call/n2': 'tool-call denied 3',
      'conv/team/agent/lead/turn': 'turn-engine idle 30',
      'conv/team/agent/writer-1': 'agent-lifecycle idle 6',
      'conv/team/agent/writer-1/turn': 'turn-engine idle 11',
      'conv/team/plan/release': 'autonomy-loop goal_met 11',
      'provider/backup': 'circuit-breaker CLOSED 3',
      'provider/model': 'circuit-breaker CLOSED 12',
      'provider/primary': 'circuit-breaker OPEN 2',
      'session/fixture': 'agent-manager-session completed 8',
    });
    // Several agents' turns in one conversation: the lead's, the researcher it delegated to, the plan's writer, the ReAct agent.
    expect(logOf('conv/team/agent/lead.d1').runes[0]?.event).toMatchObject({ type: 'spawn', input: { agentId: 'lead.d1', role: 'researcher', parentId: 'lead' } });
    expect(kindsOf('conv/team').filter((kind) => kind === 'new_turn')).toHaveLength(5);
    expect(kindsOf('conv/team/agent/lead/call/n1')).toEqual(['tool.call', 'tool.approval_requested', 'tool.approved', 'tool.claimed', 'tool.result']);
    expect(kindsOf('conv/team/agent/lead/call/n2')).toEqual(['tool.call', 'tool.approval_requested', 'tool.denied']);
    expect(kindsOf('conv/team/plan/release').at(-1)).toBe('plan.goal_met');
    expect(kindsOf('conv/team/agent/calc/react')).toContain('tool-call-completed');
    expect(kindsOf('session/fixture')).toEqual([
      'spawned',
      'start_session',
      'session_created',
      'api_req_started',
      'say:text',
      'ask:tool',
      'say:completion_result',
      'process_exit',
    ]);
    expect(logOf('provider/primary').runes[1]?.event).toMatchObject({ type: 'failure', error: 'HTTP 503: overloaded' });
  });

  it("folds every stream: each stored event is one its machine accepts, the state after it has the rune's `to`, and the last state passes the machine's state schema and is the head's", () => {
    const problems: string[] = [];
    for (const { head, machine, runes, states } of logs) {
      const at = (seq: number) => `${head.stream} seq ${seq}`;
      runes.forEach((rune, i) => {
        const parsed = Rune.safeParse(rune);
        if (!parsed.success) problems.push(`${at(rune.seq)}: not a rune: ${parsed.error.message}`);
        if (rune.seq !== i + 1) problems.push(`${at(rune.seq)}: expected seq ${i + 1}`);
        if (rune.stream !== head.stream || rune.machine !== head.machine) problems.push(`${at(rune.seq)}: of ${rune.stream} (${rune.machine})`);
        if (i > 0) {
          const event = machine.schemas.event.safeParse(rune.event);
          if (!event.success) problems.push(`${at(rune.seq)}: its ${rune.event.type} event fails the schema: ${event.error.message}`);
          if (states[i] === states[i - 1]) problems.push(`${at(rune.seq)}: its ${rune.event.type} event is no longer accepted`);
        }
        // A state the machine now leaves at once by an internal transition (a turn's ending, since) is where it lands.
        const lands = rune.to !== undefined && isTableMachine(machine) ? (machine.internal[rune.to] ?? rune.to) : rune.to;
        if (lands !== undefined && valueOf(states[i]) !== lands) problems.push(`${at(rune.seq)}: folds to ${String(valueOf(states[i]))}, the rune says ${rune.to}`);
      });
      const last = states.at(-1);
      const state = machine.schemas.state.safeParse(last);
      if (!state.success) problems.push(`${head.stream}: its state fails the schema: ${state.error.message}`);
      if (runes.length !== head.seq) problems.push(`${head.stream}: ${runes.length} runes, its head says ${head.seq}`);
      if (head.value !== undefined && valueOf(last) !== head.value) problems.push(`${head.stream}: folds to ${String(valueOf(last))}, its head says ${head.value}`);
    }
    expect(problems).toEqual([]);
    expect(logs.reduce((sum, log) => sum + log.runes.length, 0)).toBe(173);
  });

  it("reads each rune's event and payload as its kind's schemas say (table machines)", () => {
    const problems: string[] = [];
    for (const { head, machine, runes } of logs) {
      if (!isTableMachine(machine)) continue;
      const events = runeEventSchemas(machine);
      const payloads: Readonly<Record<string, { safeParse(value: unknown): { success: boolean; error?: { message: string } } }>> = runePayloadSchemas(machine);
      for (const rune of runes) {
        const at = `${head.stream} seq ${rune.seq} (${rune.kind})`;
        const event = events[rune.kind]?.safeParse(rune.event);
        if (event === undefined) problems.push(`${at}: the machine has no such kind`);
        else if (!event.success) problems.push(`${at}: its event fails the kind's schema: ${event.error.message}`);
        const payload = Object.hasOwn(payloads, rune.kind) ? payloads[rune.kind] : undefined;
        if (payload === undefined) {
          if (rune.payload !== undefined) problems.push(`${at}: a payload where the kind has none`);
        } else {
          const parsed = payload.safeParse(rune.payload);
          if (!parsed.success) problems.push(`${at}: its payload fails the kind's schema: ${parsed.error?.message}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('hydrates every stream through a fresh engine to the fold of its runes, and each stored snapshot is the fold up to its seq', async () => {
    const problems: string[] = [];
    let snapshots = 0;
    let landed = 0;
    for (const { head, machine, runes, states } of logs) {
      const hydrated = await engine.snapshot(head.stream);
      expect({ stream: head.stream, ...hydrated }).toEqual({ stream: head.stream, seq: runes.length, state: withoutAdded(head.machine, states.at(-1), hydrated?.state) });
      const stored = await store.latestSnapshot(head.stream);
      if (stored === undefined) continue;
      snapshots++;
      if (stored.seq < 1 || stored.seq > runes.length) problems.push(`${head.stream}: a snapshot at seq ${stored.seq} of ${runes.length}`);
      // Stored in a state the machine now leaves at once by an internal transition (a turn's ending): as it lands.
      else
        expect({ stream: head.stream, seq: stored.seq, state: landedOf(machine, stored.state, () => landed++) }).toEqual({
          stream: head.stream,
          seq: stored.seq,
          state: withoutAdded(head.machine, states[stored.seq - 1]),
        });
    }
    expect(problems).toEqual([]);
    expect(snapshots).toBe(7);
    expect(landed).toBe(1); // writer-1's turn, stored at its turn.completed
  });

  it('breaks no invariant, in any stream or in the whole log', () => {
    for (const { runes } of logs) expect(checkInvariants(runes)).toEqual([]);
    expect(checkInvariants(logs.flatMap((log) => log.runes))).toEqual([]);
  });
});
