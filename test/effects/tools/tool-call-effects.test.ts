import { NEVER, Subject, VirtualTimeScheduler, of } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { marbles } from 'rxjs-marbles';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { INTERRUPTED_BY_RESTART, type EpicCommand, type Rune, type StreamHead, type ToolCallEvent, type ToolCallInput, type ToolCallState } from '../../../src/index.js';
import { defineTool, toolCallEffects, type ToolExecutionContext } from '../../../src/agents.js';
import { epicContext } from '../../support/epic-context.js';
import { callRune, callState, spawnRune } from './support.js';

/** Epics in isolation: a hot observable of runes in, commands out; no engine, no store. */

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  inputSchema: z.object({ word: z.string() }),
  execute: ({ word }) => ({ word, meaning: `${word}, n.` }),
});
const rm = defineTool({ name: 'rm', description: 'Removes a file.', inputSchema: z.object({ path: z.string() }), needsApproval: true, execute: () => null });
const charge = defineTool({
  name: 'charge',
  description: 'Charges a card.',
  inputSchema: z.object({ cents: z.number().int() }),
  needsApproval: ({ cents }) => cents > 10_000,
  execute: () => 'charged',
});
const picky = defineTool({
  name: 'picky',
  description: 'Its approval policy fails.',
  inputSchema: z.object({}),
  needsApproval: () => {
    throw new Error('policy service down');
  },
  execute: () => null,
});

const input = (stream: string, toolName: string, args: ToolCallInput['arguments']): ToolCallInput => ({ callId: stream, toolName, arguments: args });
const cmd = (stream: string, event: ToolCallEvent): EpicCommand => ({ stream, event });
/** What a tool run made: its rune's origin says the tool. */
const toolCmd = (stream: string, event: ToolCallEvent): EpicCommand => ({ stream, event, by: 'tool' });
/** A rune moving a call into executing: by `no_approval_needed`, or by `approved` (kind tool.approved). */
const executingRune = (stream: string, by: 'no_approval_needed' | 'approved' = 'no_approval_needed', at = 0): Rune =>
  by === 'approved'
    ? callRune(stream, 3, { type: 'approved', approver: 'ann' }, 'awaiting_approval', 'executing', { kind: 'tool.approved', at })
    : callRune(stream, 2, { type: 'no_approval_needed' }, 'pending_call', 'executing', { at });

/** Claim ids `run-1`, `run-2`, ... in the order the runs claim. */
const claimIds = () => {
  let n = 0;
  return () => `run-${++n}`;
};
/** A run's claim, as the epic emits it and as its rune comes back (seq 3, after the rune that entered executing). */
const claimEvent = (claim: string, supersedes?: string): ToolCallEvent => ({ type: 'execution_claimed', claim, ...(supersedes === undefined ? {} : { supersedes }) });
const claimCmd = (stream: string, claim: string, supersedes?: string): EpicCommand => cmd(stream, claimEvent(claim, supersedes));
const claimedRune = (stream: string, claim: string, seq = 3, supersedes?: string): Rune =>
  callRune(stream, seq, claimEvent(claim, supersedes), 'executing', 'executing', { kind: 'tool.claimed' });
/** Collects commands, sending each claim back as its rune (what the engine does once it is durable). */
const echoingClaims = (runes: Subject<Rune>, commands: EpicCommand[]) => (command: EpicCommand) => {
  const event = 'event' in command ? command.event : undefined;
  if (event?.type === 'execution_claimed') runes.next(claimedRune(command.stream, String(event.claim)));
  else commands.push(command);
};

/** A context whose `state` finds each call in `states` (a call heard live is in memory). */
const contextWith = (scheduler: TestScheduler | VirtualTimeScheduler, states: Record<string, ToolCallState>, overrides = {}) =>
  epicContext(scheduler, { state: <S>(stream: string) => states[stream] as S | undefined, ...overrides });

/** A tool that never finishes on its own, and shows what it was given. */
function hangingTool(timeoutMs = 60_000) {
  const runs: ToolExecutionContext[] = [];
  const tool = defineTool({
    name: 'hang',
    description: 'Runs until stopped.',
    inputSchema: z.object({}),
    timeoutMs,
    execute: (_input, context) => {
      runs.push(context);
      return new Promise<never>(() => {});
    },
  });
  return { tool, runs };
}

describe('toolCallEffects: the approval policy', () => {
  it(
    "decides each new call by its tool's needsApproval; an unknown tool or bad arguments need none (the execution step ends them)",
    marbles((m) => {
      const runes = m.hot('-a-b-c-d-e-f-g', {
        a: spawnRune('call-a', input('call-a', 'lookup', { word: 'rune' })),
        b: spawnRune('call-b', input('call-b', 'rm', { path: '/etc' })),
        c: spawnRune('call-c', input('call-c', 'charge', { cents: 50_000 })),
        d: spawnRune('call-d', input('call-d', 'charge', { cents: 500 })),
        e: spawnRune('call-e', input('call-e', 'nope', {})),
        f: spawnRune('call-f', input('call-f', 'rm', { path: 7 })),
        g: spawnRune('call-g', input('call-g', 'picky', {})),
      });
      const commands = toolCallEffects({ tools: [lookup, rm, charge, picky] })(runes, epicContext(m.scheduler), undefined);
      m.expect(commands).toBeObservable('-a-b-c-d-e-f-g', {
        a: cmd('call-a', { type: 'no_approval_needed' }),
        b: cmd('call-b', { type: 'requires_approval', policyReason: 'tool "rm" requires approval' }),
        c: cmd('call-c', { type: 'requires_approval', policyReason: 'tool "charge" requires approval' }),
        d: cmd('call-d', { type: 'no_approval_needed' }),
        e: cmd('call-e', { type: 'no_approval_needed' }),
        f: cmd('call-f', { type: 'no_approval_needed' }),
        g: cmd('call-g', { type: 'requires_approval', policyReason: 'the approval policy of tool "picky" failed: policy service down' }),
      });
    }),
  );

  it('ignores runes of other machines', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('-a', { a: { ...spawnRune('x', input('x', 'lookup', { word: 'w' })), machine: 'chat-actor' } });
      expectObservable(toolCallEffects({ tools: [lookup] })(runes, epicContext(scheduler), undefined)).toBe('');
    });
  });
});

describe('toolCallEffects: execution', () => {
  it('runs the tool once when its call enters executing: progress chunks, then the output', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    let executions = 0;
    const count = defineTool({
      name: 'count',
      description: 'Counts to n, reporting each step.',
      inputSchema: z.object({ n: z.number() }),
      execute: ({ n }, { progress }) => {
        executions++;
        for (let i = 1; i <= n; i++) progress(`${i} of ${n}`);
        return { counted: n };
      },
    });
    scheduler.run(({ hot, expectObservable }) => {
      // The tool runs only once its claim comes back as a rune.
      const runes = hot<Rune>('-a-c', { a: executingRune('call-1'), c: claimedRune('call-1', 'run-1') });
      const commands = toolCallEffects({ tools: [count], claimId: claimIds() })(
        runes,
        contextWith(scheduler, { 'call-1': callState(input('call-1', 'count', { n: 2 })) }),
        undefined,
      );
      // Within the tool's 60 s: its outcome's rune never comes back here (see the outcome-rune test below).
      expectObservable(commands, '^ 30s !').toBe('-c-(pqs)', {
        c: claimCmd('call-1', 'run-1'),
        p: toolCmd('call-1', { type: 'progress_update', chunk: '1 of 2' }),
        q: toolCmd('call-1', { type: 'progress_update', chunk: '2 of 2' }),
        s: toolCmd('call-1', { type: 'success', output: { counted: 2 } }),
      });
    });
    expect(executions).toBe(1);
  });

  it('ends a call naming the unknown tool (and the known ones), or the failing field', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('-a-b', { a: executingRune('call-a'), b: executingRune('call-b') });
      const states = { 'call-a': callState(input('call-a', 'nope', {})), 'call-b': callState(input('call-b', 'lookup', { word: 42 })) };
      expectObservable(toolCallEffects({ tools: [lookup, rm] })(runes, contextWith(scheduler, states), undefined)).toBe('-a-b', {
        a: cmd('call-a', { type: 'execution_error', error: 'unknown tool "nope"; the known tools are: "lookup", "rm"' }),
        b: cmd('call-b', { type: 'execution_error', error: 'invalid arguments for tool "lookup": word: Invalid input: expected string, received number' }),
      });
    });
  });

  it('a tool that throws ends its own call only; the next call runs', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    const broken = defineTool({
      name: 'broken',
      description: 'Throws.',
      inputSchema: z.object({}),
      execute: () => {
        throw new TypeError('cannot read "x" of undefined');
      },
    });
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('-ab-cd', { a: executingRune('call-a'), b: claimedRune('call-a', 'run-1'), c: executingRune('call-b'), d: claimedRune('call-b', 'run-2') });
      const states = { 'call-a': callState(input('call-a', 'broken', {})), 'call-b': callState(input('call-b', 'lookup', { word: 'ok' })) };
      expectObservable(toolCallEffects({ tools: [broken, lookup], claimId: claimIds() })(runes, contextWith(scheduler, states), undefined), '^ 30s !').toBe('-ab-cd', {
        a: claimCmd('call-a', 'run-1'),
        b: toolCmd('call-a', { type: 'execution_error', error: 'TypeError: cannot read "x" of undefined' }),
        c: claimCmd('call-b', 'run-2'),
        d: toolCmd('call-b', { type: 'success', output: { word: 'ok', meaning: 'ok, n.' } }),
      });
    });
  });

  it("times out after the tool's timeoutMs on the scheduler, aborting its signal", () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    const { tool, runs } = hangingTool(5000);
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('-ac', { a: executingRune('call-1'), c: claimedRune('call-1', 'run-1') });
      const commands = toolCallEffects({ tools: [tool], claimId: claimIds() })(runes, contextWith(scheduler, { 'call-1': callState(input('call-1', 'hang', {})) }), undefined);
      expectObservable(commands, '^ 1m !').toBe('-c 5000ms t', { c: claimCmd('call-1', 'run-1'), t: toolCmd('call-1', { type: 'execution_timeout' }) });
    });
    expect(runs).toHaveLength(1);
    expect(runs[0]!.signal.aborted).toBe(true);
    expect(runs[0]!.signal.reason).toMatchObject({ name: 'TimeoutError', message: 'tool "hang" timed out after 5000 ms' });
  });

  it("ends a call whose outcome left no rune (refused, or failed in the store) with execution_timeout at its tool's deadline, once", () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    const quick = defineTool({ name: 'quick', description: 'Answers at once.', inputSchema: z.object({}), timeoutMs: 5000, execute: () => 'fine' });
    scheduler.run(({ hot, expectObservable }) => {
      // The success's rune never comes back: the call stays executing, and its run's own timer stopped with the run.
      const runes = hot<Rune>('-a-c', { a: executingRune('call-1'), c: claimedRune('call-1', 'run-1') });
      const commands = toolCallEffects({ tools: [quick], claimId: claimIds() })(
        runes,
        contextWith(scheduler, { 'call-1': callState(input('call-1', 'quick', {})) }),
        undefined,
      );
      expectObservable(commands, '^ 1m !').toBe('-c-s 4999ms t', {
        c: claimCmd('call-1', 'run-1'),
        s: toolCmd('call-1', { type: 'success', output: 'fine' }),
        t: toolCmd('call-1', { type: 'execution_timeout' }),
      });
    });
  });

  it('aborts the signal, with the reason, when the call is cancelled; no timeout follows', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    const { tool, runs } = hangingTool(5000);
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('-ab 998ms c', {
        a: executingRune('call-1'),
        b: claimedRune('call-1', 'run-1'),
        c: callRune('call-1', 4, { type: 'cancelled', reason: 'user pressed stop' }, 'executing', 'cancelled_result', { kind: 'tool.result' }),
      });
      const commands = toolCallEffects({ tools: [tool], claimId: claimIds() })(runes, contextWith(scheduler, { 'call-1': callState(input('call-1', 'hang', {})) }), undefined);
      expectObservable(commands, '^ 1m !').toBe('-a', { a: claimCmd('call-1', 'run-1') });
    });
    expect(runs[0]!.signal.aborted).toBe(true);
    expect(runs[0]!.signal.reason).toMatchObject({ name: 'AbortError', message: 'tool "hang": call cancelled: user pressed stop' });
  });

  it('starts the tool on approval (the approval is the continuation), and only once while the call stays executing', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    let executions = 0;
    const approved = defineTool({
      name: 'rm',
      description: 'Removes a file.',
      inputSchema: z.object({ path: z.string() }),
      needsApproval: true,
      execute: ({ path }) => {
        executions++;
        return `removed ${path}`;
      },
    });
    scheduler.run(({ hot, expectObservable }) => {
      // A second rune that keeps the call executing (a progress update) keeps its run: no second start.
      const runes = hot<Rune>('-ac-p', {
        a: executingRune('call-1', 'approved'),
        c: claimedRune('call-1', 'run-1', 4),
        p: callRune('call-1', 5, { type: 'progress_update', chunk: '50%' }, 'executing', 'executing', { kind: 'tool.progress' }),
      });
      const epic = toolCallEffects({ tools: [approved], claimId: claimIds() });
      const context = contextWith(scheduler, { 'call-1': callState(input('call-1', 'rm', { path: '/tmp/x' })) });
      expectObservable(epic(runes, context, undefined), '^ 30s !').toBe('-cs', {
        c: claimCmd('call-1', 'run-1'),
        s: toolCmd('call-1', { type: 'success', output: 'removed /tmp/x' }),
      });
    });
    expect(executions).toBe(1);
  });

  it('settles promises: a value is the output, a rejection the error, a value JSON cannot carry an error naming the tool', async () => {
    const scheduler = new VirtualTimeScheduler();
    const asyncTool = (name: string, run: () => Promise<unknown>) => defineTool({ name, description: name, inputSchema: z.object({}), execute: run });
    const tools = [
      asyncTool('fetch_ok', async () => ({ status: 200, at: new Date(0) })),
      asyncTool('fetch_fail', async () => Promise.reject(new Error('ECONNREFUSED 127.0.0.1:9'))),
      asyncTool('fetch_big', async () => 2n ** 64n),
    ];
    const runes = new Subject<Rune>();
    const states = Object.fromEntries(tools.map((t) => [t.name, callState(input(t.name, t.name, {}))]));
    const commands: EpicCommand[] = [];
    toolCallEffects({ tools })(runes, contextWith(scheduler, states), undefined).subscribe(echoingClaims(runes, commands));
    for (const t of tools) runes.next(executingRune(t.name));
    await new Promise((resolve) => setImmediate(resolve)); // the tools' promises settle
    expect(commands.sort((a, b) => a.stream.localeCompare(b.stream))).toEqual([
      toolCmd('fetch_big', {
        type: 'execution_error',
        error: 'NonJsonOutputError: tool "fetch_big" returned a value that is not JSON: TypeError: Do not know how to serialize a BigInt',
      }),
      toolCmd('fetch_fail', { type: 'execution_error', error: 'ECONNREFUSED 127.0.0.1:9' }),
      toolCmd('fetch_ok', { type: 'success', output: { status: 200, at: '1970-01-01T00:00:00.000Z' } }),
    ]);
  });

  it('drops progress reported after the run ended', async () => {
    const scheduler = new VirtualTimeScheduler();
    let late: ((chunk: string) => void) | undefined;
    const chatty = defineTool({
      name: 'chatty',
      description: 'Keeps talking.',
      inputSchema: z.object({}),
      execute: (_input, { progress }) => {
        late = progress;
        return 'done';
      },
    });
    const runes = new Subject<Rune>();
    const commands: EpicCommand[] = [];
    toolCallEffects({ tools: [chatty] })(runes, contextWith(scheduler, { 'call-1': callState(input('call-1', 'chatty', {})) }), undefined).subscribe(
      echoingClaims(runes, commands),
    );
    runes.next(executingRune('call-1'));
    late!('too late');
    expect(commands).toEqual([toolCmd('call-1', { type: 'success', output: 'done' })]);
  });
});

describe('toolCallEffects: the approval timeout', () => {
  it('ends a call awaiting approval for approvalTimeoutMs; approval, denial or cancellation disarm it', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const awaiting = (stream: string) => callRune(stream, 2, { type: 'requires_approval' }, 'pending_call', 'awaiting_approval', { kind: 'tool.approval_requested' });
      const runes = hot<Rune>('(abcd) 10s (efg)', {
        a: awaiting('call-1'),
        b: awaiting('call-2'),
        c: awaiting('call-3'),
        d: awaiting('call-4'),
        e: callRune('call-2', 3, { type: 'approved' }, 'awaiting_approval', 'executing', { kind: 'tool.approved', at: 10_000 }),
        f: callRune('call-3', 3, { type: 'denied', reason: 'no' }, 'awaiting_approval', 'denied', { kind: 'tool.denied', at: 10_000 }),
        g: callRune('call-4', 3, { type: 'cancelled' }, 'awaiting_approval', 'cancelled_result', { kind: 'tool.result', at: 10_000 }),
      });
      // No state in memory: the approved call-2 does not run here; this is about clocks.
      const commands = toolCallEffects({ tools: [rm], approvalTimeoutMs: 60_000 })(runes, epicContext(scheduler, { snapshot: () => NEVER }), undefined);
      expectObservable(commands, '^ 90s !').toBe('60s t', { t: { ...cmd('call-1', { type: 'approval_timeout' }), by: 'timer' } });
    });
  });

  it('refuses options that are not positive', () => {
    expect(() => toolCallEffects({ tools: [], approvalTimeoutMs: 0 })).toThrow('toolCallEffects: "approvalTimeoutMs" must be positive, got 0');
    expect(() => toolCallEffects({ tools: [], resolutionMs: -1 })).toThrow('toolCallEffects: "resolutionMs" must be positive, got -1');
    expect(() => toolCallEffects({ tools: [lookup, lookup] })).toThrow('toolCallEffects: two tools are named "lookup"; tool names must be unique');
  });
});

describe('toolCallEffects at start: the stored calls', () => {
  it('decides pending calls, re-arms approvals at their deadline; of the calls left executing, re-runs claimed rerun-safe ones under a new claim, interrupts the other claimed ones, runs the unclaimed', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    let reruns = 0;
    const safe = defineTool({
      name: 'safe',
      description: 'A read: safe to run again.',
      inputSchema: z.object({}),
      rerunSafe: true,
      execute: () => `run ${++reruns}`,
    });
    scheduler.run(({ hot, expectObservable }) => {
      const head = (stream: string, value: string, at: number): StreamHead => ({ stream, machine: 'tool-call', seq: 2, value, at });
      const states: Record<string, ToolCallState> = {
        pending: callState(input('pending', 'rm', { path: '/x' }), 'pending_call'),
        approval: callState(input('approval', 'rm', { path: '/y' }), 'awaiting_approval'),
        late: callState(input('late', 'rm', { path: '/z' }), 'awaiting_approval'),
        safe: { ...callState(input('safe', 'safe', {})), claim: 'dead-1', attempt: 1 },
        unsafe: { ...callState(input('unsafe', 'rm', { path: '/w' })), claim: 'dead-2', attempt: 1 },
        // Entered executing, never claimed: its tool never started, rerunSafe or not.
        unstarted: callState(input('unstarted', 'rm', { path: '/v' })),
      };
      const stored: StreamHead[] = [
        head('pending', 'pending_call', -5000),
        // Entered awaiting_approval 4 minutes before this start (deadline in 6), and 20 minutes before (past).
        head('approval', 'awaiting_approval', -240_000),
        head('late', 'awaiting_approval', -1_200_000),
        head('safe', 'executing', -1000),
        head('unsafe', 'executing', -1000),
        head('unstarted', 'executing', -1000),
      ];
      const context = contextWith(scheduler, states, { streams: (q: { values?: readonly string[] }) => of(...stored.filter((h) => q.values!.includes(h.value!))) });
      // The timeouts' runes come back (else they are sent again a minute later).
      const timedOut = (stream: string, at: number) => callRune(stream, 3, { type: 'approval_timeout' }, 'awaiting_approval', 'timeout_result', { kind: 'tool.result', at });
      // So do the claims, and the outcomes (else the calls, still executing, time out at their tools' deadline).
      const outcome = (stream: string, output: string | null) => callRune(stream, 4, { type: 'success', output }, 'executing', 'completed_result', { kind: 'tool.result' });
      const runes = hot<Rune>('-l 8ms (cd) 9ms (xy) 359974ms a', {
        l: timedOut('late', 1),
        c: claimedRune('safe', 'run-1', 3, 'dead-1'),
        d: claimedRune('unstarted', 'run-2'),
        x: outcome('safe', 'run 1'),
        y: outcome('unstarted', null),
        a: timedOut('approval', 360_001),
      });
      const commands = toolCallEffects({ tools: [rm, safe], claimId: claimIds() })(runes, context, undefined);
      expectObservable(commands, '^ 7m !').toBe('(pcedu) 3ms (sr) 359986ms a', {
        p: cmd('pending', { type: 'requires_approval', policyReason: 'tool "rm" requires approval' }),
        c: claimCmd('safe', 'run-1', 'dead-1'),
        e: cmd('unsafe', { type: 'execution_error', error: INTERRUPTED_BY_RESTART }),
        d: claimCmd('unstarted', 'run-2'),
        s: toolCmd('safe', { type: 'success', output: 'run 1' }),
        r: toolCmd('unstarted', { type: 'success', output: null }),
        u: { ...cmd('late', { type: 'approval_timeout' }), by: 'timer' },
        a: { ...cmd('approval', { type: 'approval_timeout' }), by: 'timer' },
      });
    });
    expect(reruns).toBe(1);
  });
});
