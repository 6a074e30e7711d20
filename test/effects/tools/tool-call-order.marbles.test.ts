import { Subject, defer, from, of, type Subscription } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { marbles } from 'rxjs-marbles';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  INTERRUPTED_BY_RESTART,
  toolCall,
  type Epic,
  type EpicCommand,
  type Rune,
  type Snapshot,
  type StreamHead,
  type ToolCallEvent,
  type ToolCallInput,
  type ToolCallState,
  type TurnEngineState,
} from '../../../src/index.js';
import { defineTool, toolCallEffects } from '../../../src/agents.js';
import { agentStreams, turnEngine } from '../../../src/index.js';
import { epicContext } from '../../support/epic-context.js';
import { callRune, callState, spawnRune } from './support.js';

/**
 * Seed 003 "Parallel-safe tools run concurrently": within one tool round, calls of parallel-safe
 * tools start at once, any other call starts only when every call before it in the round has
 * ended. First the epic alone (runes in, decisions out), then whole rounds on the machine.
 */

const a = agentStreams('conv/c1', 'a1');
const call = (callId: string, toolName: string): ToolCallInput => ({ callId, toolName, arguments: {} });
const cmd = (callId: string, event: ToolCallEvent): EpicCommand => ({ stream: a.call(callId), event });
const go = (callId: string) => cmd(callId, { type: 'no_approval_needed' });
/** The agent's turn in its tool round: these calls, in the model's order. */
const turnIn = (callIds: readonly string[]): TurnEngineState => ({
  value: 'tool_executing',
  turn: 1,
  input: 'go',
  output: '',
  callIds: [...callIds],
  turnUsage: turnEngine.initial().turnUsage,
});

const noop = () => null;
const write = defineTool({ name: 'write', description: 'Writes.', inputSchema: z.object({}), execute: noop });
const read = defineTool({ name: 'read', description: 'Reads.', inputSchema: z.object({}), parallelSafe: true, execute: noop });
const deploy = defineTool({ name: 'deploy', description: 'Deploys.', inputSchema: z.object({}), needsApproval: true, execute: noop });
const tools = [write, read, deploy];
const ask = (callId: string) => cmd(callId, { type: 'requires_approval', policyReason: 'tool "deploy" requires approval' });

/** A context that knows the agent's turn and these calls' stored states (as `snapshot` reads them). */
function contextOf(scheduler: TestScheduler, turn: TurnEngineState | undefined, calls: readonly ToolCallInput[], overrides = {}) {
  const states = new Map<string, ToolCallState>(calls.map((c) => [a.call(c.callId), callState(c, 'pending_call')]));
  const stateOf = (stream: string): unknown => (stream === a.turn ? turn : states.get(stream));
  return epicContext(scheduler, {
    state: <S>(stream: string) => stateOf(stream) as S | undefined,
    snapshot: <S>(stream: string) => of(stateOf(stream) === undefined ? undefined : ({ stream, seq: 2, state: stateOf(stream) } as Snapshot<S>)),
    ...overrides,
  });
}

/** The rune that ends a call: `success` unless said otherwise. */
const ended = (callId: string, event: ToolCallEvent = { type: 'success', output: null }, from = 'executing', to = 'completed_result'): Rune =>
  callRune(a.call(callId), 3, event, from, to, { kind: 'tool.result' });
const spawned = (c: ToolCallInput): Rune => spawnRune(a.call(c.callId), c);
/** The spawn runes of a round as marble values `a`, `b`, `c`, ... in call order. */
const spawnsOf = (round: readonly ToolCallInput[]): Record<string, Rune> => Object.fromEntries(round.map((c, i) => [String.fromCharCode(97 + i), spawned(c)]));

describe('call order: the epic decides a call only when its turn in the round comes', () => {
  it.each([
    ['write', 'a second unsafe call'],
    ['shred', 'a call of an unknown tool (not assumed safe)'],
  ])('two calls, the second of tool %s: %s is decided only when the first has ended', (second) =>
    marbles((m) => {
      const round = [call('w1', 'write'), call('w2', second)];
      const runes = m.hot('-(ab)-c', { ...spawnsOf(round), c: ended('w1') });
      const context = contextOf(m.scheduler, turnIn(['w1', 'w2']), round);
      m.expect(toolCallEffects({ tools })(runes, context, undefined)).toBeObservable('-a----b', { a: go('w1'), b: go('w2') });
    })(),
  );

  it(
    'a mixed round: safe calls are decided at once, beside the running unsafe one; an unsafe call waits for the unsafe calls before it, never for safe ones',
    marbles((m) => {
      const round = [call('r1', 'read'), call('w1', 'write'), call('r2', 'read'), call('w2', 'write'), call('w3', 'write')];
      const runes = m.hot('-(abcde)-f--g', {
        ...spawnsOf(round),
        f: ended('w1'), // r1 and r2 are still running: w2 does not wait for them
        g: ended('w2'),
      });
      const context = contextOf(m.scheduler, turnIn(round.map((c) => c.callId)), round);
      m.expect(toolCallEffects({ tools })(runes, context, undefined)).toBeObservable('-(abc)---d--e', {
        a: go('r1'),
        b: go('w1'),
        c: go('r2'),
        d: go('w2'),
        e: go('w3'),
      });
    }),
  );

  it(
    'a failing unsafe call releases the next: an error, a timeout, a denial, a timed-out approval are all terminal',
    marbles((m) => {
      const round = [call('w1', 'write'), call('w2', 'write'), call('d1', 'deploy'), call('d2', 'deploy'), call('w3', 'write')];
      const runes = m.hot('-(abcde)-f-g-h-i', {
        ...spawnsOf(round),
        f: ended('w1', { type: 'execution_error', error: 'disk full' }, 'executing', 'error_result'),
        g: ended('w2', { type: 'execution_timeout' }, 'executing', 'timeout_result'),
        h: ended('d1', { type: 'denied', reason: 'not today' }, 'awaiting_approval', 'denied'),
        i: ended('d2', { type: 'approval_timeout' }, 'awaiting_approval', 'timeout_result'),
      });
      const context = contextOf(m.scheduler, turnIn(round.map((c) => c.callId)), round);
      // d1 is asked for approval only when w2 has ended, and holds w3 back until it is denied: approvals come one at a time too.
      m.expect(toolCallEffects({ tools, approvalTimeoutMs: 3_600_000 })(runes, context, undefined)).toBeObservable('-a-------b-c-d-e', {
        a: go('w1'),
        b: go('w2'),
        c: ask('d1'),
        d: ask('d2'),
        e: go('w3'),
      });
    }),
  );

  it(
    'a call cancelled while it waits (its turn was interrupted) stops waiting: it is never decided',
    marbles((m) => {
      const round = [call('w1', 'write'), call('w2', 'write')];
      const runes = m.hot('-(ab)-xc', {
        ...spawnsOf(round),
        x: ended('w2', { type: 'cancelled', reason: 'user stop' }, 'pending_call', 'cancelled_result'),
        c: ended('w1', { type: 'cancelled', reason: 'user stop' }, 'executing', 'cancelled_result'),
      });
      const context = contextOf(m.scheduler, turnIn(['w1', 'w2']), round);
      m.expect(toolCallEffects({ tools })(runes, context, undefined)).toBeObservable('-a', { a: go('w1') });
    }),
  );

  it(
    'an earlier call not yet created holds a later one back until its own spawn shows it parallel-safe',
    marbles((m) => {
      const round = [call('r1', 'read'), call('w1', 'write')];
      // w1's spawn is heard first (the stored snapshot has no r1 yet).
      const runes = m.hot('-a--b', { a: spawned(round[1]!), b: spawned(round[0]!) });
      const context = contextOf(m.scheduler, turnIn(['r1', 'w1']), [round[1]!]);
      m.expect(toolCallEffects({ tools })(runes, context, undefined)).toBeObservable('----(ab)', { a: go('w1'), b: go('r1') });
    }),
  );

  it(
    'a call outside a round is decided at once: not an agent call, no turn stream, or a turn past its round',
    marbles((m) => {
      const runes = m.hot('-abc', {
        a: spawnRune('call-1', call('c1', 'write')),
        b: spawned(call('w2', 'write')),
        c: spawnRune(agentStreams('conv/c1', 'a2').call('w3'), call('w3', 'write')),
      });
      // a1's turn has moved on to another round; a2 has no turn stream at all.
      const context = contextOf(m.scheduler, turnIn(['w0', 'w1']), []);
      m.expect(toolCallEffects({ tools })(runes, context, undefined)).toBeObservable('-abc', {
        a: { stream: 'call-1', event: { type: 'no_approval_needed' } },
        b: go('w2'),
        c: { stream: agentStreams('conv/c1', 'a2').call('w3'), event: { type: 'no_approval_needed' } },
      });
    }),
  );

  it(
    'after a restart the stored round keeps its order: the interrupted first call releases the second, which holds back the third',
    marbles((m) => {
      const round = [call('w1', 'write'), call('w2', 'write'), call('w3', 'write')];
      const heads: StreamHead[] = [
        { stream: a.call('w1'), machine: 'tool-call', seq: 3, value: 'executing', at: 0 },
        { stream: a.call('w2'), machine: 'tool-call', seq: 1, value: 'pending_call', at: 0 },
        { stream: a.call('w3'), machine: 'tool-call', seq: 1, value: 'pending_call', at: 0 },
      ];
      const context = contextOf(m.scheduler, turnIn(['w1', 'w2', 'w3']), round, {
        streams: (query: { values?: readonly string[] }) => from(heads.filter((h) => query.values!.includes(h.value!))),
        // w1 was claimed: it started in the process that died.
        state: <S>(stream: string) => (stream === a.call('w1') ? ({ ...callState(round[0]!, 'executing'), claim: 'dead', attempt: 1 } as S) : undefined),
      });
      // The interrupted call's result comes back as a rune, then w2's.
      const runes = m.hot('--a--b', { a: ended('w1', { type: 'execution_error', error: INTERRUPTED_BY_RESTART }, 'executing', 'error_result'), b: ended('w2') });
      m.expect(toolCallEffects({ tools })(runes, context, undefined)).toBeObservable('e-a--b', {
        e: cmd('w1', { type: 'execution_error', error: INTERRUPTED_BY_RESTART }),
        a: go('w2'),
        b: go('w3'),
      });
    }),
  );
});

/**
 * The engine's part, by hand, in virtual time: one agent's round of `toolCall` streams in memory.
 * What the epic emits is applied by the real `toolCall` machine a moment later (as a commit would)
 * and comes back as a rune; `restart` drops the epic's run and starts a new one on what is stored.
 */
function roundOnMachine(scheduler: TestScheduler, epic: Epic, round: readonly ToolCallInput[]) {
  const calls = new Map<string, { state: ToolCallState; seq: number; at: number }>();
  const turn = turnIn(round.map((c) => c.callId));
  let runes = new Subject<Rune>();
  const publish = (stream: string, state: ToolCallState, seq: number, rune: Omit<Rune, 'stream' | 'seq' | 'machine' | 'at'>) => {
    calls.set(stream, { state, seq, at: scheduler.now() });
    runes.next({ stream, seq, machine: toolCall.id, at: scheduler.now(), ...rune });
  };
  const apply = ({ stream, event }: { stream: string; event: ToolCallEvent }) => {
    const current = calls.get(stream);
    if (current === undefined) return;
    const step = toolCall.step(current.state, event);
    if (step.accepted) publish(stream, step.state, current.seq + 1, { kind: step.kind, event, from: current.state.value, to: step.state.value });
  };
  const stored = (stream: string) => (stream === a.turn ? { stream, seq: 2, state: turn } : calls.has(stream) ? { stream, ...calls.get(stream)! } : undefined);
  const context = epicContext(scheduler, {
    state: <S>(stream: string) => stored(stream)?.state as S | undefined,
    snapshot: <S>(stream: string) => defer(() => of(stored(stream) as Snapshot<S> | undefined)),
    streams: (query) =>
      defer(() =>
        from(
          [...calls]
            .filter(([, c]) => query?.values?.includes(c.state.value) === true)
            .map(([stream, c]): StreamHead => ({ stream, machine: toolCall.id, seq: c.seq, value: c.state.value, at: c.at })),
        ),
      ),
  });
  let running: Subscription;
  const start = () => {
    runes = new Subject<Rune>();
    running = epic(runes, context, undefined).subscribe((command) => scheduler.schedule(() => apply(command as { stream: string; event: ToolCallEvent })));
  };
  start();
  for (const c of round) publish(a.call(c.callId), toolCall.initial(c), 1, { kind: 'tool.call', event: { type: 'spawn', input: c }, to: 'pending_call' });
  return {
    restart: () => {
      running.unsubscribe();
      start();
    },
    valueOf: (callId: string) => calls.get(a.call(callId))?.state.value,
  };
}

/** Tools that take virtual time, noting when each call (its `id` argument) starts, ends or is stopped. */
function timedTools(scheduler: TestScheduler) {
  const timeline: string[] = [];
  const timed = (name: string, ms: number, options: { parallelSafe?: boolean; rerunSafe?: boolean; fails?: boolean } = {}) =>
    defineTool({
      name,
      description: `${name}s for ${ms} ms.`,
      inputSchema: z.object({ id: z.string() }),
      parallelSafe: options.parallelSafe ?? false,
      rerunSafe: options.rerunSafe ?? false,
      execute: ({ id }, { signal }) => {
        timeline.push(`${scheduler.now()} start ${id}`);
        signal.addEventListener('abort', () => timeline.push(`${scheduler.now()} stop ${id}`));
        // A thenable settled on the scheduler, so the run takes `ms` of virtual time (a Promise
        // would settle in a microtask, outside the virtual clock); runTool is its only reader.
        return {
          // oxlint-disable-next-line unicorn/no-thenable
          then: (ok: (value: string) => void, fail: (error: Error) => void) =>
            void scheduler.schedule(() => {
              if (signal.aborted) return;
              timeline.push(`${scheduler.now()} end ${id}`);
              if (options.fails === true) fail(new Error(`${id} failed`));
              else ok(id);
            }, ms),
        } as unknown as PromiseLike<string>;
      },
    });
  return { timeline, timed };
}

const timedCall = (id: string, toolName: string): ToolCallInput => ({ callId: id, toolName, arguments: { id } });

describe('call order: whole rounds on the machine, in virtual time', () => {
  it('two unsafe calls never overlap and run in call order', () => {
    const scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
    const { timeline, timed } = timedTools(scheduler);
    scheduler.run(() => {
      roundOnMachine(scheduler, toolCallEffects({ tools: [timed('write', 10)] }), [timedCall('w1', 'write'), timedCall('w2', 'write')]);
    });
    expect(timeline).toEqual(['0 start w1', '10 end w1', '10 start w2', '20 end w2']);
  });

  it('safe calls overlap each other and the unsafe ones; a failing unsafe call releases the next', () => {
    const scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
    const { timeline, timed } = timedTools(scheduler);
    const tools = [timed('read', 15, { parallelSafe: true }), timed('write', 10), timed('flaky', 5, { fails: true })];
    const round = [timedCall('r1', 'read'), timedCall('f1', 'flaky'), timedCall('r2', 'read'), timedCall('w1', 'write'), timedCall('w2', 'write')];
    let played!: ReturnType<typeof roundOnMachine>;
    scheduler.run(() => {
      played = roundOnMachine(scheduler, toolCallEffects({ tools }), round);
    });
    expect(timeline).toEqual([
      '0 start r1',
      '0 start f1',
      '0 start r2',
      '5 end f1', // an error: the next unsafe call starts
      '5 start w1',
      '15 end r1',
      '15 end r2',
      '15 end w1',
      '15 start w2',
      '25 end w2',
    ]);
    expect(round.map((c) => played.valueOf(c.callId))).toEqual(['completed_result', 'error_result', 'completed_result', 'completed_result', 'completed_result']);
  });

  it('a restart mid-round keeps the order: the running call runs again (rerunSafe) and the waiting ones follow it, one at a time', () => {
    const scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
    const { timeline, timed } = timedTools(scheduler);
    const epic = toolCallEffects({ tools: [timed('write', 10, { rerunSafe: true }), timed('read', 12, { parallelSafe: true })] });
    let played!: ReturnType<typeof roundOnMachine>;
    scheduler.run(() => {
      played = roundOnMachine(scheduler, epic, [timedCall('w1', 'write'), timedCall('r1', 'read'), timedCall('w2', 'write'), timedCall('w3', 'write')]);
      scheduler.schedule(() => played.restart(), 4); // the process dies 4 ms in
    });
    expect(timeline).toEqual([
      '0 start w1',
      '0 start r1',
      '4 stop w1',
      '4 stop r1',
      // The new run finds w1 and r1 executing, w2 and w3 pending: w1 (rerunSafe) runs again, r1
      // ends "interrupted by restart", and w2 waits for w1 as before.
      '4 start w1',
      '14 end w1',
      '14 start w2',
      '24 end w2',
      '24 start w3',
      '34 end w3',
    ]);
    expect(['w1', 'r1', 'w2', 'w3'].map((id) => played.valueOf(id))).toEqual(['completed_result', 'error_result', 'completed_result', 'completed_result']);
  });
});
