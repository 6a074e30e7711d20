import { EMPTY, VirtualTimeScheduler, filter, firstValueFrom, of } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { chatActorLifecycle, chatActorNotices, type ChatActorState, type Engine, type HeadsQuery, type Rune, type StreamHead } from '../../src/index.js';
import { createEngine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { epicContext } from '../support/epic-context.js';
import { quiet, runVirtualTimeUntil, settle, stepVirtualTime } from '../support/virtual-time.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const rune = (stream: string, seq: number, kind: string, from: string | undefined, to: string, at = 0): Rune => ({
  stream,
  seq,
  machine: 'chat-actor',
  kind,
  event: { type: kind },
  ...(from === undefined ? {} : { from }),
  to,
  at,
});

describe('chatActorLifecycle epic', () => {
  it('sends InactivityTimeout after 10 idle minutes; every event restarts the clock, Ping included', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      // a: spawned idle at 0; b: spawned idle at 0, pinged at 5 min; c: spawned at 0, running at 1 min.
      const runes = hot<Rune>('(abc) 59999ms d 239999ms e', {
        a: rune('a', 1, 'spawned', undefined, 'idle'),
        b: rune('b', 1, 'spawned', undefined, 'idle'),
        c: rune('c', 1, 'spawned', undefined, 'idle'),
        d: rune('c', 2, 'ProcessInteraction', 'idle', 'running', 60_000),
        e: rune('b', 2, 'Ping', 'idle', 'idle', 300_000),
      });
      const commands = chatActorLifecycle({ staleAfterMs: 0 })(runes, epicContext(scheduler), undefined);
      // No rune of a's timeout comes back here (as if its dispatch failed): it is tried again every minute.
      expectObservable(commands, '^ 15m !').toBe('10m a 59.999s a 59.999s a 59.999s a 59.999s a 59.999s (ba)', {
        a: { stream: 'a', event: { type: 'InactivityTimeout' }, by: 'timer' },
        b: { stream: 'b', event: { type: 'InactivityTimeout' }, by: 'timer' },
      });
    });
  });

  it('appends nothing for a running actor while runes come; one stale for staleAfterMs gets a Pause, retried until its rune lands', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      // a: running at 1 s, a client's Ping at 32 s, then silent. b: running at 1 s, done at 50 s.
      const runes = hot<Rune>('(ab) 999ms (cd) 30999ms e 17999ms f 101999ms g', {
        a: rune('a', 1, 'spawned', undefined, 'idle'),
        b: rune('b', 1, 'spawned', undefined, 'idle'),
        c: rune('a', 2, 'ProcessInteraction', 'idle', 'running', 1000),
        d: rune('b', 2, 'ProcessInteraction', 'idle', 'running', 1000),
        e: rune('a', 3, 'Ping', 'running', 'running', 32_000), // restarts a's stale window
        f: rune('b', 3, 'InteractionComplete', 'running', 'idle', 50_000),
        g: rune('a', 4, 'Pause', 'running', 'paused', 152_000), // the retried Pause lands
      });
      const commands = chatActorLifecycle({ staleAfterMs: 60_000, inactivityTimeoutMs: 3_600_000 })(runes, epicContext(scheduler), undefined);
      // a is stale at 92 s; that Pause's rune never comes (as if its dispatch failed): tried again a minute later.
      expectObservable(commands, '^ 30m !').toBe('92s p 59.999s p', { p: { stream: 'a', event: { type: 'Pause', reason: 'stale: no activity' }, by: 'timer' } });
    });
  });

  it("a chat actor's window restarts with each rune of its chat's work (not another chat's), and stands still while a call of its chat awaits approval", () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const work = (stream: string, seq: number, kind: string, at: number, from?: string, to?: string): Rune => ({
        stream,
        seq,
        machine: 'turn-engine',
        kind,
        event: { type: kind },
        ...(from === undefined ? {} : { from }),
        ...(to === undefined ? {} : { to }),
        at,
      });
      const c1 = 'chat/c1/actor/1';
      const c3 = 'chat/c3/actor/1';
      const call = 'chat/c3/agent/assistant/call/call_1';
      // c1 runs at 1 s; its turn streams at 31 s and 61 s; chat/c10's turn (another chat) at 100 s.
      // c3 runs at 1 s; its call waits for approval until it is approved at 200 s.
      const runes = hot<Rune>('(abcd) 29999ms e 29999ms f 38999ms g 29999ms i 69999ms h 69999ms j', {
        a: rune(c1, 1, 'spawned', undefined, 'idle'),
        b: rune(c3, 1, 'spawned', undefined, 'idle'),
        c: rune(c1, 2, 'ProcessInteraction', 'idle', 'running', 1000),
        d: rune(c3, 2, 'ProcessInteraction', 'idle', 'running', 1000),
        e: work('chat/c1/agent/assistant/turn', 3, 'turn.assistant_delta', 31_000, 'streaming', 'streaming'),
        f: work('chat/c1/agent/assistant/turn', 4, 'turn.assistant_delta', 61_000, 'streaming', 'streaming'),
        g: work('chat/c10/agent/assistant/turn', 2, 'turn.assistant_delta', 100_000, 'streaming', 'streaming'),
        h: { ...work(call, 3, 'tool.approved', 200_000, 'awaiting_approval', 'executing'), machine: 'tool-call' },
        // Each stale Pause lands (else it would be tried again a minute later).
        i: rune(c1, 3, 'Pause', 'running', 'paused', 121_000),
        j: rune(c3, 3, 'Pause', 'running', 'paused', 260_000),
      });
      const streams = (query?: HeadsQuery) =>
        query?.prefix === 'chat/c3/' && scheduler.now() < 200_000
          ? of<StreamHead>({ stream: call, seq: 2, machine: 'tool-call', value: 'awaiting_approval', at: 1000 })
          : EMPTY;
      const commands = chatActorLifecycle({ staleAfterMs: 60_000, inactivityTimeoutMs: 3_600_000 })(runes, epicContext(scheduler, { streams }), undefined);
      // c1: 60 s after its chat's last work (61 s), not its own last rune (1 s). c3: 60 s after the approval ended the wait.
      expectObservable(commands, '^ 30m !').toBe('121s p 138.999s q', {
        p: { stream: c1, event: { type: 'Pause', reason: 'stale: no activity' }, by: 'timer' },
        q: { stream: c3, event: { type: 'Pause', reason: 'stale: no activity' }, by: 'timer' },
      });
    });
  });

  it('releases an actor that is shut down (the engine itself releases one in a terminal state), and stops both clocks', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable, flush }) => {
      const released: string[] = [];
      const runes = hot<Rune>('(ab) 1s (cd)', {
        a: rune('a', 1, 'spawned', undefined, 'idle'),
        b: rune('b', 1, 'spawned', undefined, 'idle'),
        c: rune('a', 2, 'Cancel', 'idle', 'cancelled', 1000),
        d: rune('b', 2, 'Shutdown', 'idle', 'idle', 1000),
      });
      const commands = chatActorLifecycle()(runes, epicContext(scheduler, { release: (s) => void released.push(s) }), undefined);
      expectObservable(commands, '^ 20m !').toBe('');
      flush();
      expect(released).toEqual(['b']);
    });
  });

  it('refuses a timeout or resolution that is not positive, a negative staleness window and an unknown option, naming it', () => {
    expect(() => chatActorLifecycle({ inactivityTimeoutMs: 0 })).toThrow('"inactivityTimeoutMs" must be positive, got 0');
    expect(() => chatActorLifecycle({ staleAfterMs: -1 })).toThrow('"staleAfterMs" must be 0 (off) or positive, got -1');
    expect(() => chatActorLifecycle({ resolutionMs: 0 })).toThrow('"resolutionMs" must be positive, got 0');
    expect(() => chatActorLifecycle({ heartbeatMs: 30_000 } as never)).toThrow(
      new TypeError('chatActorLifecycle: unknown option "heartbeatMs"; the options are inactivityTimeoutMs, staleAfterMs, resolutionMs'),
    );
  });
});

describe('chatActorLifecycle in an engine', () => {
  it('completes an idle actor after the timeout, releases it, and a later dispatch respawns it from the log', async () => {
    const scheduler = new VirtualTimeScheduler(undefined, 60 * 60_000);
    const store = memoryStore();
    const engine = createEngine({ store, scheduler, epics: [chatActorLifecycle()] });
    const notices: string[] = [];
    engine.runes$().subscribe((r) => notices.push(...chatActorNotices(r).map((n) => `${n.type}:${JSON.stringify(n.data)}`)));
    await new Promise((r) => queueMicrotask(() => r(undefined))); // epics start on the next microtask
    await engine.spawn('chat-1', 'chat-actor');
    await engine.dispatch('chat-1', { type: 'ProcessInteraction', userId });
    await engine.dispatch('chat-1', { type: 'InteractionComplete', success: true });

    const timedOut = firstValueFrom(engine.runes$().pipe(filter((r) => r.kind === 'InactivityTimeout')));
    scheduler.flush(); // 10 virtual minutes later: the timeout is dispatched
    await timedOut;
    expect((await store.read('chat-1')).map((r) => `${r.kind}@${r.at}`)).toEqual(['spawned@0', 'ProcessInteraction@0', 'InteractionComplete@0', 'InactivityTimeout@600000']);
    expect(engine.size).toBe(0); // released on its terminal state
    expect(notices).toEqual([
      'state_changed:{"from_state":"idle","to_state":"running","reason":"Processing user interaction"}',
      'state_changed:{"from_state":"running","to_state":"idle","reason":"Interaction complete"}',
      'state_changed:{"from_state":"idle","to_state":"completed","reason":"Inactivity timeout"}',
      'stopped:{"reason":"inactivity_timeout","partial_response":""}',
    ]);

    // The next dispatch respawns it from the log: it is completed, so the event is refused.
    expect(await engine.dispatch('chat-1', { type: 'Ping' })).toEqual({ accepted: false, code: 'terminal_state', reason: 'terminal state' });
    expect(await firstValueFrom(engine.state$<ChatActorState>('chat-1'))).toMatchObject({ value: 'completed' });
    await engine.close();
  });
});

describe('chatActorLifecycle across a restart: durable clocks', () => {
  /** The store outlives the engines, as a file would; each engine has its own clock. */
  /** Virtual time runs up to `until`: a timeout due later (or a retry of it) does not fire. */
  async function idleActorThenRestartAt(restartAt: number, until: number) {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const before = createEngine({ store: kept, scheduler: new VirtualTimeScheduler(), epics: [chatActorLifecycle()] });
    await before.spawn('chat-1', 'chat-actor'); // idle at 0: its deadline is 10 minutes
    await before.close();

    const scheduler = new VirtualTimeScheduler(undefined, until);
    scheduler.frame = restartAt; // the process comes back later
    const after = createEngine({ store: kept, scheduler, epics: [chatActorLifecycle()] });
    const timedOut = firstValueFrom(after.runes$().pipe(filter((r) => r.kind === 'InactivityTimeout')));
    await new Promise((r) => setImmediate(r)); // epics start, list the stored heads, arm the clock
    scheduler.flush();
    await timedOut;
    const runes = await store.read('chat-1');
    await after.close();
    return runes.map((r) => `${r.kind}@${r.at}`);
  }

  it('fires at the original deadline, not a full timeout after the restart', async () => {
    expect(await idleActorThenRestartAt(4 * 60_000, 10 * 60_000)).toEqual(['spawned@0', 'InactivityTimeout@600000']);
  });

  it('fires at once when the deadline passed while the process was down', async () => {
    expect(await idleActorThenRestartAt(15 * 60_000, 15 * 60_000)).toEqual(['spawned@0', 'InactivityTimeout@900000']);
  });
});

describe('chatActorLifecycle across a restart: shut-down actors', () => {
  it('arms no clock for an actor shut down while idle, as the process that shut it down did not; its idle neighbour times out', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const before = createEngine({ store: kept, scheduler: new VirtualTimeScheduler(), epics: [chatActorLifecycle()] });
    await before.spawn('stopped', 'chat-actor');
    await before.dispatch('stopped', { type: 'Shutdown' });
    await before.spawn('idle', 'chat-actor');
    await before.close();

    const scheduler = new VirtualTimeScheduler(undefined, 10 * 60_000);
    const after = createEngine({ store: kept, scheduler, epics: [chatActorLifecycle()] });
    const timedOut = firstValueFrom(after.runes$().pipe(filter((r) => r.kind === 'InactivityTimeout')));
    await new Promise((r) => setImmediate(r)); // epics start, list the stored heads, arm the clocks
    scheduler.flush(); // to the deadline: both clocks run out, and each reads its stream's last rune
    expect(await timedOut).toMatchObject({ stream: 'idle', at: 600_000 });
    scheduler.maxFrames = 60 * 60_000;
    scheduler.flush(); // an hour: a timeout of the shut-down one, or a retry of it, would land here
    await new Promise((r) => setImmediate(r));
    expect((await store.read('stopped')).map((r) => r.kind)).toEqual(['spawned', 'Shutdown']);
    expect((await store.read('idle')).map((r) => r.kind)).toEqual(['spawned', 'InactivityTimeout']);
    await after.close();
  });

  it('times out an actor armed from the store whose last rune is not a Shutdown, reading that rune first', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const before = createEngine({ store: kept, scheduler: new VirtualTimeScheduler() });
    await before.spawn('chat-1', 'chat-actor');
    await before.dispatch('chat-1', { type: 'Shutdown' });
    await before.dispatch('chat-1', { type: 'Ping' }); // used again after its shutdown
    await before.close();

    const scheduler = new VirtualTimeScheduler(undefined, 10 * 60_000);
    const after = createEngine({ store: kept, scheduler, epics: [chatActorLifecycle()] });
    const timedOut = firstValueFrom(after.runes$().pipe(filter((r) => r.kind === 'InactivityTimeout')));
    await new Promise((r) => setImmediate(r));
    scheduler.flush();
    expect(await timedOut).toMatchObject({ stream: 'chat-1', from: 'idle', to: 'completed', at: 600_000 });
    await after.close();
  });
});

// Outside the chat scheme a clock is its deadline alone; in it (`chat/<c>/actor/<n>`), a clock reads
// its chat's work from the store when due, the memory store's listing by prefix a scan of every stream.
describe.each([
  { scheme: 'outside the chat scheme', actors: 100_000, streamOf: (i: number) => `chat-${i}` },
  { scheme: 'in the chat scheme', actors: 5_000, streamOf: (i: number) => `chat/c${i}/actor/1` },
])('chatActorLifecycle across a restart: $actors stored idle actors $scheme', ({ actors, streamOf }) => {
  it('re-arms every clock from the heads alone, each firing at its original instant (at once if passed), none for a shut-down actor', async () => {
    const restartAt = 60 * 60_000;
    const timeout = 10 * 60_000;
    const window = 200_000;
    // One in five is the sample: deadlines one per second from 50 s before the restart (passed: due
    // at once) to 149 s after it. The rest are due an hour or more later, past the time run here: a
    // timeout dispatched is a hydration and an append, and 100,000 of them take minutes here.
    const sampled = (i: number) => i % 5 === 0;
    const deadlineOf = (i: number) => (sampled(i) ? restartAt + ((i % 200) - 50) * 1000 : restartAt + 60 * 60_000 + (i % 3600) * 1000);
    const shutDown = (i: number) => i % 10_000 === 5; // of the sample, one in 2,000 shut down while idle
    const shutDowns = Math.ceil((actors - 5) / 10_000);
    const store = memoryStore();
    for (let i = 0; i < actors; i++) {
      const stream = streamOf(i);
      const at = deadlineOf(i) - timeout;
      store.appendSync!({ stream, seq: 1, machine: 'chat-actor', kind: 'spawned', event: { type: 'spawn' }, to: 'idle', at });
      if (shutDown(i)) store.appendSync!({ stream, seq: 2, machine: 'chat-actor', kind: 'Shutdown', event: { type: 'Shutdown' }, from: 'idle', to: 'idle', at });
    }

    const scheduler = new VirtualTimeScheduler();
    scheduler.frame = restartAt;
    const engine = createEngine({ store, scheduler, epics: [chatActorLifecycle()] });
    const timeouts: Rune[] = [];
    engine.runes$().subscribe((r) => {
      if (r.kind === 'InactivityTimeout') timeouts.push(r);
    });
    // Every due time in turn through the window, and a minute past it: a shut-down actor's timeout, or its retry, would come here.
    await runVirtualTimeUntil(
      scheduler,
      () => timeouts.length,
      () => (scheduler.actions[0]?.delay ?? Infinity) > restartAt + window + 60_000,
    );

    const indexOf = (r: Rune) => Number(/\d+/.exec(r.stream)![0]);
    expect(timeouts.filter((r) => !sampled(indexOf(r)))).toEqual([]);
    expect(timeouts.filter((r) => r.at !== Math.max(restartAt, deadlineOf(indexOf(r)))).slice(0, 3)).toEqual([]);
    expect(timeouts.filter((r) => r.at === restartAt)).toHaveLength((actors / 200) * 11 - shutDowns); // passed while down, or due right then: at once
    expect(new Set(timeouts.map((r) => r.stream)).size).toBe(actors / 5 - shutDowns);
    expect(timeouts).toHaveLength(actors / 5 - shutDowns);
    for (let i = 5; i < actors; i += 10_000) expect((await store.read(streamOf(i))).map((r) => r.kind)).toEqual(['spawned', 'Shutdown']);
    await engine.close();
  }, 300_000);
});

describe('chatActorLifecycle across a restart: interrupted interactions', () => {
  it('pauses an actor left running by a crash, and its clock then runs from the pause', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const crashed = createEngine({ store: kept, scheduler: new VirtualTimeScheduler() });
    await crashed.spawn('chat-1', 'chat-actor');
    await crashed.dispatch('chat-1', { type: 'ProcessInteraction', userId }); // running when the process dies

    const scheduler = new VirtualTimeScheduler(undefined, 60 * 60_000);
    scheduler.frame = 60_000; // back a minute later
    const engine = createEngine({ store: kept, scheduler, epics: [chatActorLifecycle()] });
    const paused = firstValueFrom(engine.runes$().pipe(filter((r) => r.kind === 'Pause')));
    await new Promise((r) => setImmediate(r));
    expect(await paused).toMatchObject({ from: 'running', to: 'paused', event: { type: 'Pause', reason: 'interrupted by restart' }, at: 60_000 });

    const timedOut = firstValueFrom(engine.runes$().pipe(filter((r) => r.kind === 'InactivityTimeout')));
    scheduler.flush();
    expect(await timedOut).toMatchObject({ at: 660_000 }); // ten minutes after the pause
    await engine.close();
  });

  it('pauses a crash-left running actor whose Ping arrives while the stored streams are still being listed', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, cold, expectObservable }) => {
      // The listing takes 5 ms (a slow store); a client's Ping to the crash-left actor lands at 2 ms.
      const runes = hot<Rune>('--p', { p: rune('a', 3, 'Ping', 'running', 'running', 2) });
      const heads = cold<StreamHead>('-----(h|)', { h: { stream: 'a', machine: 'chat-actor', seq: 2, value: 'running', at: 0 } });
      const commands = chatActorLifecycle()(runes, epicContext(scheduler, { streams: () => heads }), undefined);
      expectObservable(commands, '^ 1m !').toBe('--x', { x: { stream: 'a', event: { type: 'Pause', reason: 'interrupted by restart' } } });
    });
  });
});

describe('chatActorLifecycle: the log does not grow on its own', () => {
  const actors = 10_000;
  const hour = 60 * 60_000;
  const streamIds = Array.from({ length: actors }, (_, i) => `chat-${i}`);

  /**
   * Runs virtual time up to `until`, one due time at a time, letting the engine commit what each
   * tick dispatched before the next: a rune's `at` is then the time of the tick that caused it.
   */
  async function runVirtualTime(scheduler: VirtualTimeScheduler, until: number): Promise<void> {
    for (let next = scheduler.actions[0]?.delay; next !== undefined && next <= until; next = scheduler.actions[0]?.delay) {
      scheduler.maxFrames = next;
      scheduler.flush();
      await new Promise((r) => setImmediate(r));
    }
    scheduler.frame = until;
  }

  async function putInRunning(engine: ReturnType<typeof createEngine>): Promise<void> {
    for (const stream of streamIds) {
      await engine.spawn(stream, 'chat-actor');
      await engine.dispatch(stream, { type: 'ProcessInteraction', userId });
    }
  }

  /** Each kind appended, with how many of it. */
  const countKinds = (runes: readonly Rune[]): Record<string, number> => {
    const counts: Record<string, number> = {};
    for (const r of runes) counts[r.kind] = (counts[r.kind] ?? 0) + 1;
    return counts;
  };

  it('10,000 running actors through an hour append one stale Pause each, then their timeout: no Ping per beat', async () => {
    const scheduler = new VirtualTimeScheduler(undefined, hour);
    const engine = createEngine({ scheduler, epics: [chatActorLifecycle()] });
    await new Promise((r) => queueMicrotask(() => r(undefined))); // epics start on the next microtask
    await putInRunning(engine);
    const appended: Rune[] = [];
    engine.runes$().subscribe((r) => appended.push(r));

    await runVirtualTime(scheduler, hour);
    expect(appended.length).toBe(2 * actors);
    expect(countKinds(appended)).toEqual({ Pause: actors, InactivityTimeout: actors });
    expect(appended.filter((r) => r.kind === 'Pause').every((r) => r.at === 600_000 && r.event.reason === 'stale: no activity')).toBe(true);
    expect(appended.filter((r) => r.kind === 'InactivityTimeout').every((r) => r.at === 1_200_000 && r.to === 'completed')).toBe(true);
    expect(engine.size).toBe(0); // completed, so released: nothing of them is left in memory
    await engine.close();
  });

  it('with staleAfterMs 0, 10,000 running actors through an hour append nothing', async () => {
    const scheduler = new VirtualTimeScheduler(undefined, hour);
    const engine = createEngine({ scheduler, epics: [chatActorLifecycle({ staleAfterMs: 0 })] });
    await new Promise((r) => queueMicrotask(() => r(undefined)));
    await putInRunning(engine);
    const appended: Rune[] = [];
    engine.runes$().subscribe((r) => appended.push(r));

    await runVirtualTime(scheduler, hour);
    expect(appended.length).toBe(0);
    expect(engine.size).toBe(actors); // still running, owned by this process
    await engine.close();
  });

  it('10,000 actors left running by a crash are each paused once after the restart, and their log then grows only by their timeout', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const crashed = createEngine({ store: kept, scheduler: new VirtualTimeScheduler() });
    await putInRunning(crashed); // running when the process dies

    const scheduler = new VirtualTimeScheduler(undefined, hour);
    scheduler.frame = 60_000; // back a minute later
    const engine = createEngine({ store: kept, scheduler, epics: [chatActorLifecycle()] });
    const appended: Rune[] = [];
    engine.runes$().subscribe((r) => appended.push(r));
    await new Promise((r) => setImmediate(r)); // epics start, list the stored heads, pause the running ones
    await runVirtualTime(scheduler, hour);

    expect(countKinds(appended)).toEqual({ Pause: actors, InactivityTimeout: actors });
    expect(appended.filter((r) => r.kind === 'Pause').every((r) => r.at === 60_000 && r.event.reason === 'interrupted by restart')).toBe(true);
    expect((await store.read('chat-0')).map((r) => `${r.kind}@${r.at}`)).toEqual(['spawned@0', 'ProcessInteraction@0', 'Pause@60000', 'InactivityTimeout@660000']);
    await engine.close();
  });
});

describe("chatActorLifecycle across a restart: the chat's work", () => {
  const MINUTE = 60_000;
  const actor = 'chat/c1/actor/1';
  const turn = 'chat/c1/agent/assistant/turn';
  const call = 'chat/c1/agent/assistant/call/call_1';

  /**
   * A chat actor idle at 0 in a store that outlives its engines; `before` runs in the first
   * process, which dies at `crashAt`; `after` runs in the next one, started then, whose clock is
   * stepped to `until` (a timeout due later does not fire). The actor's runes, as `kind@at`.
   */
  async function restartedChat(
    crashAt: number,
    until: number,
    before: (engine: Engine, at: (ms: number) => void) => Promise<void>,
    after: (engine: Engine, at: (ms: number) => Promise<void>) => Promise<void>,
  ) {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const first = new VirtualTimeScheduler();
    const crashed = createEngine({ store: kept, scheduler: first, epics: [chatActorLifecycle()] });
    await crashed.spawn(actor, 'chat-actor');
    await before(crashed, (ms) => void (first.frame = ms));
    await crashed.close();

    const scheduler = new VirtualTimeScheduler(undefined, crashAt);
    scheduler.frame = crashAt;
    const engine = createEngine({ store: kept, scheduler, epics: [chatActorLifecycle()] });
    const runes: Rune[] = [];
    engine.runes$().subscribe((r) => runes.push(r));
    await settle(); // epics start, list the stored heads, arm the clock
    // Virtual time runs to `ms`, each due time with the engine quiet after it, as a process's would.
    const at = async (ms: number): Promise<void> => {
      while (scheduler.actions[0] !== undefined && scheduler.actions[0].delay <= ms) {
        stepVirtualTime(scheduler);
        await quiet(() => runes.length);
      }
      scheduler.frame = ms;
    };
    await after(engine, at);
    await at(until);
    await engine.close();
    return (await store.read(actor)).map((r) => `${r.kind}@${r.at}`);
  }

  it("hears its chat's work after the restart: 10 quiet minutes after the turn's last rune, not the actor's", async () => {
    const runes = await restartedChat(
      MINUTE,
      30 * MINUTE,
      async () => {},
      async (engine, at) => {
        await engine.spawn(turn, 'turn-engine');
        await at(5 * MINUTE);
        expect(await engine.dispatch(turn, { type: 'start_turn', input: 'hello' })).toMatchObject({ accepted: true });
      },
    );
    expect(runes).toEqual(['spawned@0', 'InactivityTimeout@900000']);
  });

  it('counts the work its chat did before the restart, read from the store when its clock runs out', async () => {
    const runes = await restartedChat(
      6 * MINUTE,
      30 * MINUTE,
      async (engine, at) => {
        await engine.spawn(turn, 'turn-engine');
        at(5 * MINUTE);
        expect(await engine.dispatch(turn, { type: 'start_turn', input: 'hello' })).toMatchObject({ accepted: true });
      },
      async () => {},
    );
    expect(runes).toEqual(['spawned@0', 'InactivityTimeout@900000']);
  });

  it('does not time out while a call of its chat, asked before the restart, waits for a person; 10 minutes after the approval it does', async () => {
    const runes = await restartedChat(
      2 * MINUTE,
      60 * MINUTE,
      async (engine, at) => {
        await engine.spawn(call, 'tool-call', { callId: 'call_1', toolName: 'deploy', arguments: {} });
        at(MINUTE);
        expect(await engine.dispatch(call, { type: 'requires_approval' })).toMatchObject({ accepted: true });
      },
      async (engine, at) => {
        await at(30 * MINUTE);
        expect(await engine.dispatch(call, { type: 'approved', approver: 'ann' })).toMatchObject({ accepted: true });
      },
    );
    expect(runes).toEqual(['spawned@0', 'InactivityTimeout@2400000']);
  });
});
