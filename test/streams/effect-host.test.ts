import { NEVER, Observable, Subject, map, of, tap } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { marbles } from 'rxjs-marbles';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createEngine,
  stateEffects,
  type EffectOwnership,
  type Epic,
  type EngineError,
  type EpicCommand,
  type EpicReport,
  type StreamHead,
  type StreamView,
} from '../../src/index.js';
import { reactAgent, toolCall, type Rune } from '../../src/index.js';
import { epicContext } from '../support/epic-context.js';
import { callRune, spawnRune } from '../effects/tools/support.js';

/** The effect host in isolation: a hot observable of runes in, commands out; no engine. */

const input = { callId: 'c', toolName: 't', arguments: {} };
const head = (stream: string, value: string, seq = 3, at = 0): StreamHead => ({ stream, machine: toolCall.id, seq, value, at });

/** An epic whose effect `wait` is due while a call awaits approval, noting each view's origin in `origins`. */
const approvalWatcher = (origins: string[], wait: Observable<unknown>) =>
  stateEffects({
    name: 'test',
    machine: toolCall,
    states: ['awaiting_approval'],
    effects: (view) => {
      origins.push(view.origin);
      return { wait: wait as Observable<never> };
    },
  });

describe('stateEffects: reconciliation by key', () => {
  it(
    'starts a new key, keeps a kept one untouched across runes, cancels a vanished one',
    marbles((m) => {
      const runes = m.hot('-a--b--c--d', {
        a: spawnRune('call-1', input),
        b: callRune('call-1', 2, { type: 'requires_approval' }, 'pending_call', 'awaiting_approval'),
        c: callRune('call-1', 3, { type: 'approved' }, 'awaiting_approval', 'executing'),
        d: callRune('call-1', 4, { type: 'success', output: 1 }, 'executing', 'completed_result'),
      });
      const watch = m.cold('-');
      const run = m.cold('-');
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['pending_call', 'awaiting_approval', 'executing'],
        // `watch` is due in both waiting states, `run` only while executing.
        effects: (view) => ({
          ...(view.value !== 'executing' ? { watch } : {}),
          ...(view.value === 'executing' ? { run } : {}),
        }),
      });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('-');
      m.has(watch, '-^-----!');
      m.has(run, '-------^--!');
    }),
  );

  it(
    'dispatches what an effect emits: a bare event to its own stream, a command where it says',
    marbles((m) => {
      const runes = m.hot('-a', { a: spawnRune('call-1', input) });
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['pending_call'],
        effects: () => ({
          decide: m.cold('-x-y|', {
            x: { type: 'no_approval_needed' as const },
            y: { stream: 'other', event: { type: 'Ping' } },
          }),
        }),
      });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('--x-y', {
        x: { stream: 'call-1', event: { type: 'no_approval_needed' } },
        y: { stream: 'other', event: { type: 'Ping' } },
      });
    }),
  );

  it(
    'a finished effect whose key stays due is not started again; it starts again once its key came back',
    marbles((m) => {
      const runes = m.hot('-a-b-c-d', {
        a: spawnRune('call-1', input),
        b: callRune('call-1', 2, { type: 'requires_approval' }, 'pending_call', 'awaiting_approval'),
        c: callRune('call-1', 3, { type: 'approved' }, 'awaiting_approval', 'executing'),
        d: callRune('call-1', 4, { type: 'progress_update', chunk: 'x' }, 'executing', 'executing'),
      });
      const once = m.cold('(x|)', { x: { type: 'no_approval_needed' as const } });
      const epic = stateEffects({ name: 'test', machine: toolCall, states: ['pending_call', 'executing'], effects: () => ({ once }) });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('-x---x', { x: { stream: 'call-1', event: { type: 'no_approval_needed' } } });
      m.has(once, ['-(^!)', '-----(^!)']);
    }),
  );

  it(
    'restartOn restarts the kept effects of a stream',
    marbles((m) => {
      const runes = m.hot('-a-b-c', {
        a: callRune('call-1', 3, { type: 'approved' }, 'awaiting_approval', 'executing'),
        b: callRune('call-1', 4, { type: 'progress_update', chunk: 'x' }, 'executing', 'executing'),
        c: callRune('call-1', 5, { type: 'progress_update', chunk: 'restart' }, 'executing', 'executing'),
      });
      const run = m.cold('-');
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['executing'],
        effects: () => ({ run }),
        restartOn: (rune) => rune.event.type === 'progress_update' && rune.event.chunk === 'restart',
      });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('-');
      m.has(run, ['-^---!', '-----^']);
    }),
  );

  it(
    'unchangedBy: a rune of those events asks effects nothing (its later$ hears it); one that is not, or a stream not yet reconciled, is asked',
    marbles((m) => {
      const runes = m.hot('-a-b-c-d', {
        // call-2's first rune is a progress update: heard first here, it is reconciled (resumed).
        a: callRune('call-2', 4, { type: 'progress_update', chunk: 'x' }, 'executing', 'executing'),
        b: callRune('call-1', 3, { type: 'approved' }, 'awaiting_approval', 'executing'),
        c: callRune('call-1', 4, { type: 'progress_update', chunk: 'y' }, 'executing', 'executing'),
        d: callRune('call-1', 5, { type: 'progress_update', chunk: 'z' }, 'executing', 'executing'),
      });
      const asked: string[] = [];
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['executing'],
        unchangedBy: ['progress_update'],
        effects: (view) => {
          asked.push(`${view.stream}#${view.seq} ${view.origin}`);
          return {
            hear: view.stream === 'call-1' ? view.later$.pipe(map((rune) => ({ type: 'progress_update' as const, chunk: `heard ${rune.seq}` }))) : NEVER,
          };
        },
      });
      const heard = (seq: number): EpicCommand => ({ stream: 'call-1', event: { type: 'progress_update', chunk: `heard ${seq}` } });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('-----c-d', { c: heard(4), d: heard(5) });
      m.flush();
      expect(asked).toEqual(['call-2#4 resumed', 'call-1#3 live']);
    }),
  );

  it(
    "view.later$ gives an effect its own stream's later runes, the one that cancels it included, and nothing before or of other streams",
    marbles((m) => {
      const runes = m.hot('-a-b-c-d-e', {
        a: callRune('call-1', 3, { type: 'approved' }, 'awaiting_approval', 'executing'),
        b: callRune('call-2', 3, { type: 'approved' }, 'awaiting_approval', 'executing'),
        c: callRune('call-1', 4, { type: 'progress_update', chunk: 'x' }, 'executing', 'executing'),
        d: callRune('call-1', 5, { type: 'success', output: 1 }, 'executing', 'completed_result'),
        e: callRune('call-2', 4, { type: 'progress_update', chunk: 'y' }, 'executing', 'executing'),
      });
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['executing'],
        effects: (view) => ({
          hear: view.stream === 'call-1' ? view.later$.pipe(map((rune) => ({ type: 'progress_update' as const, chunk: `heard ${rune.seq}` }))) : NEVER,
        }),
      });
      const heard = (seq: number): EpicCommand => ({ stream: 'call-1', event: { type: 'progress_update', chunk: `heard ${seq}` } });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('-----c-d', { c: heard(4), d: heard(5) });
    }),
  );

  it(
    'several streams each have their own keys',
    marbles((m) => {
      const runes = m.hot('-a-b-c', {
        a: spawnRune('call-1', input),
        b: spawnRune('call-2', input),
        c: callRune('call-1', 2, { type: 'denied' }, 'pending_call', 'denied'),
      });
      const one = m.cold('-');
      const two = m.cold('-');
      const epic = stateEffects({ name: 'test', machine: toolCall, states: ['pending_call'], effects: (view) => ({ wait: view.stream === 'call-1' ? one : two }) });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('-');
      m.has(one, '-^---!');
      m.has(two, '---^');
    }),
  );
});

describe('stateEffects: resuming from the store', () => {
  it(
    'at start, resumes the stored streams in its states from their heads, without hydrating them',
    marbles((m) => {
      const views: StreamView<typeof toolCall>[] = [];
      let hydrations = 0;
      const context = epicContext(m.scheduler, {
        streams: (query) => {
          expect(query).toEqual({ machine: 'tool-call', values: ['awaiting_approval', 'executing'] });
          return m.cold('-a-b|', { a: head('call-1', 'awaiting_approval', 2, 40), b: head('call-2', 'executing', 3, 50) });
        },
        snapshot: () => {
          hydrations++;
          return of(undefined);
        },
      });
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['awaiting_approval', 'executing'],
        effects: (view) => {
          views.push(view);
          return { [view.value!]: m.cold('x', { x: { type: 'approval_timeout' as const } }) };
        },
      });
      m.expect(epic(m.hot('-'), context, undefined)).toBeObservable('-a-b', {
        a: { stream: 'call-1', event: { type: 'approval_timeout' } },
        b: { stream: 'call-2', event: { type: 'approval_timeout' } },
      });
      m.flush();
      expect(views.map(({ stream, value, seq, at, origin }) => ({ stream, value, seq, at, origin }))).toEqual([
        { stream: 'call-1', value: 'awaiting_approval', seq: 2, at: 40, origin: 'resumed' },
        { stream: 'call-2', value: 'executing', seq: 3, at: 50, origin: 'resumed' },
      ]);
      expect(hydrations).toBe(0);
    }),
  );

  it(
    'a stream heard live while the listing runs is left to its live rune',
    marbles((m) => {
      const origins: string[] = [];
      const context = epicContext(m.scheduler, { streams: () => m.cold('---a|', { a: head('call-1', 'awaiting_approval') }) });
      const runes = m.hot('-a', { a: callRune('call-1', 4, { type: 'requires_approval' }, 'pending_call', 'awaiting_approval') });
      const wait = m.cold('-');
      const epic = approvalWatcher(origins, wait);
      m.expect(epic(runes, context, undefined)).toBeObservable('-');
      m.has(wait, '-^');
      m.flush();
      expect(origins).toEqual(['live']);
    }),
  );

  it(
    'a listed head this engine stored and has not yet published is left to its live rune, which comes after the listing',
    marbles((m) => {
      const origins: string[] = [];
      // The listing reads the call's newest rune (seq 4) from the store before the engine publishes it.
      let published = false;
      const context = epicContext(m.scheduler, {
        streams: () => m.cold('-a|', { a: head('call-1', 'awaiting_approval', 4) }),
        unpublishedSeq: (stream) => (stream === 'call-1' && !published ? 4 : undefined),
      });
      const runes = m.hot('---a', { a: callRune('call-1', 4, { type: 'requires_approval' }, 'pending_call', 'awaiting_approval') });
      m.scheduler.schedule(() => (published = true), 3);
      const wait = m.cold('-');
      const epic = approvalWatcher(origins, wait);
      m.expect(epic(runes, context, undefined)).toBeObservable('-');
      m.has(wait, '---^');
      m.flush();
      expect(origins).toEqual(['live']);
    }),
  );

  it(
    'a stream first heard by a rune that keeps its state name was in it before this process: resumed',
    marbles((m) => {
      const origins: string[] = [];
      const runes = m.hot('-a-b', {
        a: callRune('call-1', 4, { type: 'progress_update', chunk: 'x' }, 'executing', 'executing'),
        b: callRune('call-1', 5, { type: 'progress_update', chunk: 'y' }, 'executing', 'executing'),
      });
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['executing'],
        effects: (view) => {
          origins.push(view.origin);
          return { run: NEVER };
        },
      });
      m.expect(epic(runes, epicContext(m.scheduler), undefined)).toBeObservable('-');
      m.flush();
      expect(origins).toEqual(['resumed', 'live']);
    }),
  );

  it('a listing that fails is tried again after a second, without disturbing running effects', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, hot, expectObservable }) => {
      let attempts = 0;
      const context = epicContext(scheduler, {
        streams: () => (++attempts === 1 ? cold('#', {}, new Error('store busy')) : cold('a|', { a: head('call-2', 'executing') })),
      });
      const runes = hot('-a', { a: callRune('call-1', 2, { type: 'no_approval_needed' }, 'pending_call', 'executing') });
      const epic = stateEffects({
        name: 'test',
        machine: toolCall,
        states: ['executing'],
        effects: (view) => ({ run: of({ type: 'execution_error' as const, error: `${view.origin} ${view.stream}` }) }),
      });
      expectObservable(epic(runes, context, undefined)).toBe('-a 998ms b', {
        a: { stream: 'call-1', event: { type: 'execution_error', error: 'live call-1' } },
        b: { stream: 'call-2', event: { type: 'execution_error', error: 'resumed call-2' } },
      });
    });
  });
});

describe("stateEffects: a data-state machine (states 'any') whose effects need its state (withState)", () => {
  type AgentState = ReturnType<typeof reactAgent.initial>;
  const agentRune = (stream: string, seq: number, timestamp: number): Rune => ({
    stream,
    seq,
    machine: reactAgent.id,
    kind: 'user-message-received',
    event: { type: 'user-message-received', messageId: `m${seq}`, content: 'hi', timestamp },
    at: timestamp,
  });
  const stateAt = (updatedAt: number): AgentState => ({ ...reactAgent.initial(), updatedAt });
  const agentHead = (stream: string): StreamHead => ({ stream, machine: reactAgent.id, seq: 2, at: 0 });

  it(
    'lists every stored stream of the machine, hydrates it, and asks for its effects with its state',
    marbles((m) => {
      const seen: Array<[string, string, number | undefined]> = [];
      const context = epicContext(m.scheduler, {
        streams: (query) => {
          expect(query).toEqual({ machine: 'react-agent' });
          return m.cold('-a|', { a: agentHead('agent-1') });
        },
        snapshot: (stream: string) => m.cold('--s|', { s: { stream, seq: 2, state: stateAt(7) } }) as never,
      });
      const epic = stateEffects({
        name: 'test',
        machine: reactAgent,
        states: 'any',
        withState: true,
        effects: (view) => {
          seen.push([view.stream, view.origin, view.state?.updatedAt]);
          return { [`at:${view.state?.updatedAt}`]: m.cold('-') };
        },
      });
      m.expect(epic(m.hot('-'), context, undefined)).toBeObservable('-');
      m.flush();
      expect(seen).toEqual([['agent-1', 'resumed', 7]]);
    }),
  );

  it(
    "a live rune reads the state from memory at once, and drops a stored stream's hydration still under way",
    marbles((m) => {
      const seen: Array<[string, string, number | undefined]> = [];
      const inMemory = new Map<string, AgentState>();
      const runes = m.hot('--a-b', { a: agentRune('agent-1', 3, 10), b: agentRune('agent-2', 1, 20) });
      const context = epicContext(m.scheduler, {
        streams: () => m.cold('-a|', { a: agentHead('agent-1') }),
        // Slower than the live rune: its answer is stale by then.
        snapshot: (stream: string) => m.cold('-----s|', { s: { stream, seq: 2, state: stateAt(7) } }) as never,
        state: ((stream: string) => inMemory.get(stream)) as never,
      });
      runes.subscribe((rune) => inMemory.set(rune.stream, stateAt(rune.at)));
      const keys = { 'agent-1': m.cold('-'), 'agent-2': m.cold('-') };
      const epic = stateEffects({
        name: 'test',
        machine: reactAgent,
        states: 'any',
        withState: true,
        effects: (view) => {
          seen.push([view.stream, view.origin, view.state?.updatedAt]);
          return { run: keys[view.stream as keyof typeof keys] };
        },
      });
      m.expect(epic(runes as Observable<Rune>, context, undefined)).toBeObservable('-');
      m.has(keys['agent-1'], '--^');
      m.has(keys['agent-2'], '----^');
      m.flush();
      expect(seen).toEqual([
        ['agent-1', 'live', 10],
        ['agent-2', 'live', 20],
      ]);
    }),
  );
});

describe('stateEffects: bad effects', () => {
  it('an effects function that throws, a key that is not an Observable, and an effect that errors are reported; other streams go on', () => {
    const reports: EpicReport[] = [];
    const runes = new Subject<ReturnType<typeof spawnRune>>();
    const commands: EpicCommand[] = [];
    const epic = stateEffects({
      name: 'flaky',
      machine: toolCall,
      states: ['pending_call'],
      effects: (view): Record<string, Observable<{ type: 'no_approval_needed' }>> => {
        if (view.stream === 'throws') throw new Error('effects exploded');
        if (view.stream === 'not-observable') return { bad: 42 as unknown as Observable<never>, good: of({ type: 'no_approval_needed' }) };
        if (view.stream === 'errors') return { boom: new Observable((s) => s.error(new Error('effect exploded'))) };
        return { good: of({ type: 'no_approval_needed' }) };
      },
    });
    const context = epicContext(new TestScheduler(() => {}), { report: (report) => reports.push(report) });
    epic(runes, context, undefined).subscribe((command) => commands.push(command));
    for (const stream of ['throws', 'not-observable', 'errors', 'fine']) runes.next(spawnRune(stream, input));
    expect(reports.map((r) => (r.type === 'effect_failed' ? [r.epic, r.stream, r.key, String(r.error)] : r.type))).toEqual([
      ['flaky', 'throws', undefined, 'Error: effects exploded'],
      ['flaky', 'not-observable', 'bad', 'TypeError: effect "bad" is not an Observable (got number)'],
      ['flaky', 'errors', 'boom', 'Error: effect exploded'],
    ]);
    expect(commands.map((c) => c.stream)).toEqual(['not-observable', 'fine']);
  });
});

describe('stateEffects: ownership', () => {
  it('runs only owned streams; a lost stream is cancelled, a gained one resumed from the store', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, hot, expectSubscriptions }) => {
      const owned = new Set(['call-1']);
      // At 4 the lease of call-1 is lost and that of call-2 gained.
      const changes$ = hot('----x').pipe(
        tap(() => {
          owned.delete('call-1');
          owned.add('call-2');
        }),
      );
      const ownership: EffectOwnership = { owns: (stream) => owned.has(stream), changes$ };
      const context = epicContext(scheduler, { ownership, streams: () => cold('a|', { a: head('call-2', 'executing') }) });
      const runes = hot('-a-b', {
        a: callRune('call-1', 2, { type: 'no_approval_needed' }, 'pending_call', 'executing'),
        b: callRune('call-2', 2, { type: 'no_approval_needed' }, 'pending_call', 'executing'),
      });
      const one = cold<never>('-');
      const two = cold<never>('-');
      const epic = stateEffects({ name: 'test', machine: toolCall, states: ['executing'], effects: (view) => ({ run: view.stream === 'call-1' ? one : two }) });
      epic(runes, context, undefined).subscribe();
      expectSubscriptions(one.subscriptions).toBe('-^--!');
      // call-2's rune came while another process owned it; gained at 4, it is resumed from its head.
      expectSubscriptions(two.subscriptions).toBe('----^');
    });
  });
});

describe('stateEffects in an engine', () => {
  it('the engine passes its ownership and reports failed effects on errors$', async () => {
    const owned = new Set(['call-1']);
    const changes$ = new Subject<void>();
    const started: string[] = [];
    const epic = stateEffects({
      name: 'watcher',
      machine: toolCall,
      states: ['pending_call'],
      effects: (view) => {
        started.push(`${view.stream} ${view.origin}`);
        return view.stream === 'call-3' ? { boom: new Observable<never>((s) => s.error(new Error('no'))) } : { wait: NEVER };
      },
    });
    const engine = createEngine({ epics: [epic], ownership: { owns: (stream) => owned.has(stream), changes$ } });
    const reports: EngineError[] = [];
    engine.errors$.subscribe((error) => reports.push(error));
    for (const stream of ['call-1', 'call-2', 'call-3']) await engine.spawn(stream, toolCall, input);
    expect(started).toEqual(['call-1 live']);
    owned.add('call-2').add('call-3');
    changes$.next();
    await new Promise((resolve) => setImmediate(resolve)); // the host lists the heads it gained
    expect(started).toEqual(['call-1 live', 'call-2 resumed', 'call-3 resumed']);
    expect(reports).toMatchObject([{ type: 'effect_failed', epic: 'watcher', stream: 'call-3', key: 'boom' }]);
    await engine.close();
  });
  it('a rune-reacting epic hears only the live runes of the streams the engine owns', async () => {
    const heard: string[] = [];
    const listener: Epic = (runes$) => {
      runes$.subscribe((rune) => heard.push(`${rune.stream}:${rune.seq}`));
      return NEVER;
    };
    const engine = createEngine({ epics: [listener], ownership: { owns: (stream) => stream !== 'theirs' } });
    await new Promise((resolve) => setImmediate(resolve)); // epics start on a microtask
    await engine.spawn('ours', toolCall, input);
    await engine.spawn('theirs', toolCall, input);
    await engine.dispatch('ours', { type: 'no_approval_needed' });
    expect(heard).toEqual(['ours:1', 'ours:2']);
    await engine.close();
  });
  it('effects declared everyProcess run for every stream, owned or not, from allRunes$; the others only for owned ones', async () => {
    const started: string[] = [];
    const declare = (everyProcess: boolean) =>
      stateEffects({
        name: everyProcess ? 'local' : 'owned',
        machine: toolCall,
        states: ['pending_call', 'executing'],
        everyProcess,
        effects: (view) => {
          started.push(`${everyProcess ? 'local' : 'owned'} ${view.stream} ${view.value}`);
          return { wait: NEVER };
        },
      });
    const engine = createEngine({ epics: [declare(true), declare(false)], ownership: { owns: (stream) => stream !== 'theirs' } });
    await new Promise((resolve) => setImmediate(resolve)); // epics start on a microtask
    await engine.spawn('ours', toolCall, input);
    await engine.spawn('theirs', toolCall, input);
    await engine.dispatch('theirs', { type: 'no_approval_needed' });
    expect(started.sort()).toEqual(['local ours pending_call', 'local theirs executing', 'local theirs pending_call', 'owned ours pending_call']);
    await engine.close();
  });
});

describe('stateEffects: reconciliation, property-based', () => {
  const STATES = ['pending_call', 'awaiting_approval', 'executing', 'denied'] as const;
  const HOSTED = ['pending_call', 'awaiting_approval', 'executing'] as const;
  const KEYS = ['a', 'b', 'c'] as const;

  it("after every rune, exactly the keys due in each stream's state run; a kept key is never restarted unless restartOn says so", () => {
    fc.assert(
      fc.property(
        // Which keys each hosted state wants.
        fc.record({ pending_call: fc.subarray([...KEYS]), awaiting_approval: fc.subarray([...KEYS]), executing: fc.subarray([...KEYS]) }),
        // Runes: a stream, the state it enters, and whether it is a restart.
        fc.array(fc.record({ stream: fc.constantFrom('s1', 's2', 's3'), to: fc.constantFrom(...STATES), restart: fc.boolean() }), { maxLength: 40 }),
        (due, steps) => {
          const running = new Map<string, number>(); // `${stream}/${key}` -> subscription id
          const starts = new Map<string, number>();
          let ids = 0;
          const effect = (stream: string, key: string) =>
            new Observable<never>(() => {
              const id = ++ids;
              running.set(`${stream}/${key}`, id);
              starts.set(`${stream}/${key}`, (starts.get(`${stream}/${key}`) ?? 0) + 1);
              return () => {
                if (running.get(`${stream}/${key}`) === id) running.delete(`${stream}/${key}`);
              };
            });
          const epic = stateEffects({
            name: 'property',
            machine: toolCall,
            states: [...HOSTED],
            effects: (view) => Object.fromEntries((due[view.value as (typeof HOSTED)[number]] ?? []).map((key) => [key, effect(view.stream, key)])),
            restartOn: (rune) => rune.event.type === 'progress_update',
          });
          const runes = new Subject<ReturnType<typeof callRune>>();
          const subscription = epic(runes, epicContext(new TestScheduler(() => {})), undefined).subscribe();
          const value = new Map<string, string>();
          const seqs = new Map<string, number>();
          for (const step of steps) {
            const from = value.get(step.stream);
            const seq = (seqs.get(step.stream) ?? 0) + 1;
            seqs.set(step.stream, seq);
            const before = new Map(running);
            const restarts = step.restart && from !== undefined;
            const event = restarts ? { type: 'progress_update', chunk: 'x' } : { type: 'no_approval_needed' };
            runes.next(callRune(step.stream, seq, event, from ?? 'pending_call', step.to));
            value.set(step.stream, step.to);
            // Every stream runs exactly the keys its state wants.
            for (const stream of ['s1', 's2', 's3']) {
              const state = value.get(stream) as (typeof HOSTED)[number] | undefined;
              const want = state === undefined || !HOSTED.includes(state) ? [] : due[state];
              const have = [...running.keys()].filter((k) => k.startsWith(`${stream}/`)).map((k) => k.slice(stream.length + 1));
              expect(have.sort(), `${stream} in ${state}`).toEqual([...want].sort());
            }
            // A key kept by this rune keeps its subscription; a restart gives it a new one.
            for (const [k, id] of before) {
              if (!k.startsWith(`${step.stream}/`) || !running.has(k)) continue;
              if (restarts) expect(running.get(k), `${k} restarted`).not.toBe(id);
              else expect(running.get(k), `${k} kept`).toBe(id);
            }
          }
          subscription.unsubscribe();
          expect(running.size).toBe(0);
        },
      ),
      { numRuns: 300 },
    );
  });
});
