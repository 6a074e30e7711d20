import { Observable, interval, map, mergeMap } from 'rxjs';
import { TestScheduler, type RunHelpers } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { agentTransition, initialAgentState, reactAgentEffectsAt, type AgentInput, type AgentState, type ReactAgentEffect } from '../../src/index.js';
import { createMoorex, type Moorex, type MoorexEffectController, type MoorexEffectEvent } from '../../src/streams/moorex.js';

const testScheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));

// A toy Moore machine: the state lists the effect keys it wants; `bump` changes the state and nothing else.
interface Toy {
  wanted: readonly string[];
  version: number;
}
type ToyInput = { type: 'want' | 'drop'; key: string } | { type: 'bump' } | { type: 'noop' };
interface ToyEffect {
  name: string;
}

const toyTransition =
  (input: ToyInput) =>
  (state: Toy): Toy => {
    switch (input.type) {
      case 'want':
        return state.wanted.includes(input.key) ? state : { ...state, wanted: [...state.wanted, input.key] };
      case 'drop':
        return state.wanted.includes(input.key) ? { ...state, wanted: state.wanted.filter((k) => k !== input.key) } : state;
      case 'bump':
        return { ...state, version: state.version + 1 };
      case 'noop':
        return state;
    }
  };
const toyEffectsAt = (state: Toy): Record<string, ToyEffect> => Object.fromEntries(state.wanted.map((k) => [k, { name: k }]));
const toy = (wanted: readonly string[] = []): Toy => ({ wanted, version: 0 });
const want = (key: string): ToyInput => ({ type: 'want', key });
const drop = (key: string): ToyInput => ({ type: 'drop', key });
const bump: ToyInput = { type: 'bump' };
const noop: ToyInput = { type: 'noop' };

const describeEvent = (e: MoorexEffectEvent<unknown>): string => `${e.type} ${e.key}${e.type === 'failed' ? `: ${(e.error as Error).message}` : ''}`;

/** Every effect event with the virtual time it happened at. */
function recordEffects(moorex: Moorex<any, any, any>, scheduler: TestScheduler): Array<[number, string]> {
  const log: Array<[number, string]> = [];
  moorex.effects$.subscribe((e) => log.push([scheduler.now(), describeEvent(e)]));
  return log;
}

describe('createMoorex: reconciliation by key', () => {
  it('reconciles at creation, starts a new key, and neither restarts nor cancels a key that stays', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, expectSubscriptions, expectObservable }) => {
      const a = cold<ToyInput>('-');
      const b = cold<ToyInput>('-');
      const runs: Record<string, Observable<ToyInput>> = { a, b };
      const moorex = createMoorex({
        initial: toy(['a']),
        transition: toyTransition,
        effectsAt: toyEffectsAt,
        runEffect: (effect: ToyEffect) => runs[effect.name]!,
      });
      hot('--w--b--b', { w: want('b'), b: bump }).subscribe(moorex.dispatch);
      expectSubscriptions(a.subscriptions).toBe('^');
      expectSubscriptions(b.subscriptions).toBe('--^');
      expectObservable(moorex.effects$.pipe(map(describeEvent))).toBe('a-b', { a: 'started a', b: 'started b' });
      expectObservable(moorex.state$.pipe(map((s) => `${s.wanted.join('')}${s.version}`))).toBe('x-y--z--w', {
        x: 'a0',
        y: 'ab0',
        z: 'ab1',
        w: 'ab2',
      });
    });
  });

  it('cancels a key that vanishes', () => {
    testScheduler().run(({ cold, hot, expectSubscriptions, expectObservable }) => {
      const a = cold<ToyInput>('-');
      const moorex = createMoorex({ initial: toy(), transition: toyTransition, effectsAt: toyEffectsAt, runEffect: () => a });
      hot('-w--d', { w: want('a'), d: drop('a') }).subscribe(moorex.dispatch);
      expectSubscriptions(a.subscriptions).toBe('-^--!'); // dropping the key cancelled the effect
      expectObservable(moorex.effects$.pipe(map(describeEvent))).toBe('-s--c', { s: 'started a', c: 'canceled a' });
    });
  });

  it('lets a completed effect leave the running set: it starts again at the next change if still due', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, expectSubscriptions, flush }) => {
      const a = cold<ToyInput>('--|');
      const moorex = createMoorex({ initial: toy(['a']), transition: toyTransition, effectsAt: toyEffectsAt, runEffect: () => a });
      const log = recordEffects(moorex, scheduler);
      hot('-----b', { b: bump }).subscribe(moorex.dispatch);
      expectSubscriptions(a.subscriptions).toBe(['^-!', '-----^-!']);
      flush();
      expect(log).toEqual([
        [0, 'started a'],
        [2, 'completed a'],
        [5, 'started a'],
        [7, 'completed a'],
      ]);
    });
  });

  it('keeps an effect that emits and completes at once running until its own inputs are applied', () => {
    // The effect for "a" bumps the state twice and completes synchronously. Were it settled before
    // its bumps were applied, each bump (a state change with "a" still due) would restart it.
    let starts = 0;
    const moorex = createMoorex({
      initial: toy(['a']),
      transition: toyTransition,
      effectsAt: toyEffectsAt,
      runEffect: () => {
        starts++;
        return new Observable<ToyInput>((subscriber) => {
          if (starts === 1) {
            subscriber.next(bump);
            subscriber.next(bump);
          }
          subscriber.complete();
        });
      },
    });
    expect(starts).toBe(1);
    expect(moorex.current().version).toBe(2);
    const running: string[] = [];
    moorex.effects$.subscribe((e) => running.push(describeEvent(e)));
    expect(running).toEqual([]); // settled after its bumps, and not restarted by them
    moorex.dispatch(bump); // the next change finds "a" still due and not running: it starts again
    expect(starts).toBe(2);
  });
  it('reports a failing effect and carries on with the others and with new inputs', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, expectSubscriptions, flush }) => {
      const a = cold<ToyInput>('--#', undefined, new Error('a broke'));
      const b = cold<ToyInput>('----x', { x: bump });
      const moorex = createMoorex({
        initial: toy(['a', 'b']),
        transition: toyTransition,
        effectsAt: toyEffectsAt,
        runEffect: (effect: ToyEffect) => {
          if (effect.name === 'c') throw new Error('c cannot start');
          return effect.name === 'a' ? a : b;
        },
      });
      const log = recordEffects(moorex, scheduler);
      cold('-------w', { w: want('c') }).subscribe(moorex.dispatch);
      expectSubscriptions(b.subscriptions).toBe('^'); // never cancelled by a's failure
      // a failed, left the running set, and started again at each next state change (b's bump, want c).
      expectSubscriptions(a.subscriptions).toBe(['^-!', '----^-!', '-------^-!']);
      flush();
      expect(log).toEqual([
        [0, 'started a'],
        [0, 'started b'],
        [2, 'failed a: a broke'],
        [4, 'started a'],
        [6, 'failed a: a broke'],
        [7, 'started a'],
        [7, 'started c'],
        [7, 'failed c: c cannot start'],
        [9, 'failed a: a broke'],
      ]);
      expect(moorex.current()).toEqual({ wanted: ['a', 'b', 'c'], version: 1 });
    });
  });

  it('emits a state only when the state object changes', () => {
    testScheduler().run(({ hot, expectObservable }) => {
      const moorex = createMoorex({ initial: toy(), transition: toyTransition, effectsAt: toyEffectsAt, runEffect: () => new Observable<ToyInput>() });
      hot('-n-b-n-d', { n: noop, b: bump, d: drop('zzz') }).subscribe(moorex.dispatch);
      expectObservable(moorex.state$.pipe(map((s) => s.version))).toBe('x--y', { x: 0, y: 1 });
    });
  });

  it('close() cancels every running effect and completes both observables', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, expectSubscriptions, expectObservable, flush }) => {
      const a = cold<ToyInput>('-');
      const b = cold<ToyInput>('-');
      const moorex = createMoorex({
        initial: () => toy(['a', 'b']),
        transition: toyTransition,
        effectsAt: toyEffectsAt,
        runEffect: (effect: ToyEffect) => (effect.name === 'a' ? a : b),
      });
      const log = recordEffects(moorex, scheduler);
      cold('---c', { c: null }).subscribe(() => moorex.close());
      expectSubscriptions(a.subscriptions).toBe('^--!');
      expectSubscriptions(b.subscriptions).toBe('^--!');
      expectObservable(moorex.state$.pipe(map((s) => s.version))).toBe('v--|', { v: 0 });
      flush();
      expect(log).toEqual([
        [0, 'started a'],
        [0, 'started b'],
        [3, 'canceled a'],
        [3, 'canceled b'],
      ]);
      moorex.dispatch(bump);
      expect(moorex.current().version).toBe(0);
    });
  });
});

describe('createMoorex: dispatch ordering', () => {
  it('queues inputs dispatched while reconciling and applies them in order, never re-entering', () => {
    let reconciling = false;
    let reentered = false;
    const log: string[] = [];
    const states: string[] = [];
    const moorex = createMoorex({
      initial: toy(['a']),
      transition: toyTransition,
      effectsAt: (state: Toy) => {
        if (reconciling) reentered = true;
        return toyEffectsAt(state);
      },
      // `a` dispatches synchronously, from inside its start: both inputs wait for this reconciliation.
      runEffect: (effect: ToyEffect) =>
        new Observable<ToyInput>((subscriber) => {
          if (effect.name !== 'a') return;
          reconciling = true;
          subscriber.next(drop('a'));
          subscriber.next(want('b'));
          reconciling = false;
          subscriber.complete();
        }),
    });
    moorex.effects$.subscribe((e) => log.push(describeEvent(e)));
    moorex.state$.subscribe((s) => states.push(s.wanted.join(',')));
    expect(reentered).toBe(false);
    // Had `drop a` been applied inside a's start, a would have been cancelled, not completed.
    expect(moorex.current()).toEqual({ wanted: ['b'], version: 0 });
    expect(log).toEqual(['started b']);
    expect(states).toEqual(['b']);
  });

  it('applies inputs dispatched by observers of state$ after the current one, in order', () => {
    const moorex = createMoorex({ initial: toy(), transition: toyTransition, effectsAt: toyEffectsAt, runEffect: () => new Observable<ToyInput>() });
    const first: number[] = [];
    const second: number[] = [];
    moorex.state$.subscribe((s) => {
      first.push(s.version);
      if (s.version === 1) moorex.dispatch(bump);
    });
    moorex.state$.subscribe((s) => second.push(s.version));
    moorex.dispatch(bump);
    expect(first).toEqual([0, 1, 2]);
    expect(second).toEqual([0, 1, 2]); // the second observer sees 1 before 2
  });
});

describe("createMoorex: the seed's {start, cancel} effects", () => {
  const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

  it('starts, dispatches, completes, cancels and fails like Observable effects', async () => {
    const canceled: string[] = [];
    const dispatchers: Record<string, (input: ToyInput) => void> = {};
    let finishA!: () => void;
    let startsOfA = 0;
    const moorex = createMoorex({
      initial: toy(['a', 'b', 'c', 'd']),
      transition: toyTransition,
      effectsAt: toyEffectsAt,
      runEffect: (effect: ToyEffect, _, key): MoorexEffectController<ToyInput> => ({
        start: (dispatch) => {
          dispatchers[key] = dispatch;
          if (key === 'a') {
            if (startsOfA++ === 0) dispatch(bump); // first run, while reconciling at creation: queued
            return new Promise<void>((resolve) => (finishA = resolve));
          }
          if (key === 'c') return Promise.reject(new Error('c rejected'));
          if (key === 'd') throw new Error('d threw');
          return new Promise<void>(() => {});
        },
        cancel: () => {
          canceled.push(effect.name);
        },
      }),
    });
    const log: string[] = [];
    moorex.effects$.subscribe((e) => log.push(describeEvent(e)));
    expect(moorex.current().version).toBe(1);
    await settled();
    expect(log).toEqual(['started a', 'started b', 'started c', 'failed c: c rejected']);

    finishA();
    await settled();
    expect(log.at(-1)).toBe('completed a');
    dispatchers.a!(bump); // a has completed: ignored
    expect(moorex.current().version).toBe(1);

    moorex.dispatch(drop('b'));
    expect(canceled).toEqual(['b']);
    dispatchers.b!(bump); // b was cancelled: ignored
    expect(moorex.current()).toEqual({ wanted: ['a', 'c', 'd'], version: 1 });
    // That change restarted the effects still due that had ended: a, c and d.
    expect(log.slice(5)).toEqual(['canceled b', 'started a', 'started c', 'started d', 'failed d: d threw']);
    moorex.close();
    expect(canceled).toEqual(['b', 'a', 'c']);
  });

  it('reports a cancel that throws as failed', () => {
    const log: string[] = [];
    const moorex = createMoorex({
      initial: toy(['a']),
      transition: toyTransition,
      effectsAt: toyEffectsAt,
      runEffect: (): MoorexEffectController<ToyInput> => ({
        start: () => new Promise<void>(() => {}),
        cancel: () => {
          throw new Error('cannot stop');
        },
      }),
    });
    moorex.effects$.subscribe((e) => log.push(describeEvent(e)));
    moorex.dispatch(drop('a'));
    moorex.dispatch(want('b'));
    expect(log).toEqual(['started a', 'failed a: cannot stop', 'started b']);
  });
});

describe('createMoorex: the doc comment example', () => {
  it('logs count 0, started ticker, count 1, count 2, canceled ticker, count 3', () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush }) => {
      type Tick = { type: 'tick' };
      const moorex = createMoorex({
        initial: { count: 0 },
        transition: (_: Tick) => (state: { count: number }) => ({ count: state.count + 1 }),
        effectsAt: (state): Record<string, { everyMs: number }> => (state.count < 3 ? { ticker: { everyMs: 10 } } : {}),
        runEffect: (effect) => interval(effect.everyMs).pipe(map((): Tick => ({ type: 'tick' }))),
      });
      const logged: Array<[number, string]> = [];
      moorex.state$.subscribe((s) => logged.push([scheduler.now(), `count ${s.count}`]));
      moorex.effects$.subscribe((e) => logged.push([scheduler.now(), `${e.type} ${e.key}`]));
      flush();
      expect(logged).toEqual([
        [0, 'count 0'],
        [0, 'started ticker'],
        [10, 'count 1'],
        [20, 'count 2'],
        [30, 'canceled ticker'],
        [30, 'count 3'],
      ]);
    });
  });
});

describe('createMoorex + reactAgent: the ReAct loop end to end', () => {
  type CallLlm = Extract<ReactAgentEffect, { type: 'call-llm' }>;
  type CallTool = Extract<ReactAgentEffect, { type: 'call-tool' }>;

  it('user message -> LLM asks for a tool -> tool result -> LLM answers, and then no effect runs', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, expectSubscriptions, flush }) => {
      // Inputs need timestamps after the state's: a clock that never repeats (the origin's nextTimestamp).
      let last = 0;
      const stamp = () => (last = Math.max(last + 1, scheduler.now()));
      const llmCalls: ReturnType<RunHelpers['cold']>[] = [];
      const toolRuns: ReturnType<RunHelpers['cold']>[] = [];

      // The fake LLM thinks for 5 frames. Without a tool result it asks for a search; with one, it answers.
      const fakeLlm = (effect: CallLlm, state: AgentState): Observable<AgentInput> => {
        const thinking = cold('-----x');
        llmCalls.push(thinking);
        const sawResult = Object.values(state.toolCalls).some((call) => call.result !== null);
        return thinking.pipe(
          mergeMap((): AgentInput[] => {
            if (!sawResult) {
              const at = stamp();
              return [
                {
                  type: 're-act-observed',
                  calledLlmAt: effect.answersTo,
                  observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'search', parameters: '{"q":"moorex"}', calledAt: at } } },
                  timestamp: at,
                },
              ];
            }
            return [
              { type: 'llm-message-started', messageId: 'a1', timestamp: stamp() },
              { type: 'llm-message-completed', messageId: 'a1', content: 'Moorex is a Moore machine.', timestamp: stamp() },
              { type: 're-act-observed', calledLlmAt: effect.answersTo, observation: { type: 'complete-re-act' }, timestamp: stamp() },
            ];
          }),
        );
      };
      // The fake search tool takes 3 frames.
      const fakeTool = (effect: CallTool): Observable<AgentInput> => {
        const running = cold('---x');
        toolRuns.push(running);
        return running.pipe(
          map((): AgentInput => {
            const at = stamp();
            return {
              type: 'tool-call-completed',
              toolCallId: effect.toolCallId,
              result: { isSuccess: true, content: `found ${effect.parameters}`, receivedAt: at },
              timestamp: at,
            };
          }),
        );
      };

      const moorex = createMoorex({
        initial: initialAgentState,
        transition: agentTransition,
        effectsAt: reactAgentEffectsAt,
        runEffect: (effect, state) => (effect.type === 'call-llm' ? fakeLlm(effect, state) : fakeTool(effect)),
      });
      const log = recordEffects(moorex, scheduler);
      hot('-u', { u: { type: 'user-message-received', messageId: 'm1', content: 'What is Moorex?', timestamp: 1 } as AgentInput }).subscribe(moorex.dispatch);
      flush();

      expect(log).toEqual([
        [1, 'started call-llm:0'],
        [6, 'canceled call-llm:0'], // its own observation moved calledLlmAt: done, so cancelled
        [6, 'started call-tool:t1'],
        [9, 'canceled call-tool:t1'],
        [9, 'started call-llm:1'],
        [14, 'canceled call-llm:1'],
      ]);
      expectSubscriptions(llmCalls[0]!.subscriptions).toBe('-^----!');
      expectSubscriptions(toolRuns[0]!.subscriptions).toBe('------^--!');
      expectSubscriptions(llmCalls[1]!.subscriptions).toBe('---------^----!');
      expect(llmCalls).toHaveLength(2);
      expect(moorex.current()).toEqual({
        updatedAt: 16,
        messages: [
          { id: 'm1', role: 'user', content: 'What is Moorex?', timestamp: 1 },
          { id: 'a1', role: 'assistant', content: 'Moorex is a Moore machine.', timestamp: 14, streaming: false },
        ],
        tools: {},
        toolCalls: {
          t1: { name: 'search', parameters: '{"q":"moorex"}', calledAt: 6, result: { isSuccess: true, content: 'found {"q":"moorex"}', receivedAt: 9 } },
        },
        calledLlmAt: 9,
        reActContext: null,
      });
      expect(reactAgentEffectsAt(moorex.current())).toEqual({});
    });
  });

  it('resumes a restored state: the tool call in flight when the process died starts again at creation', () => {
    const restored = [
      { type: 'user-message-received', messageId: 'm1', content: 'Search', timestamp: 1 },
      {
        type: 're-act-observed',
        calledLlmAt: 1,
        observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'search', parameters: '{}', calledAt: 2 } } },
        timestamp: 2,
      },
    ].reduce((state, input) => agentTransition(input as AgentInput)(state), initialAgentState());
    const started: string[] = [];
    const moorex = createMoorex({
      initial: restored,
      transition: agentTransition,
      effectsAt: reactAgentEffectsAt,
      runEffect: (effect, _, key) => {
        started.push(key);
        return effect.type === 'call-tool'
          ? new Observable<AgentInput>((subscriber) => {
              subscriber.next({ type: 'tool-call-completed', toolCallId: effect.toolCallId, result: { isSuccess: true, content: 'ok', receivedAt: 3 }, timestamp: 3 });
              subscriber.complete();
            })
          : new Observable<AgentInput>();
      },
    });
    expect(started).toEqual(['call-tool:t1', 'call-llm:1']);
    expect(moorex.current().toolCalls.t1?.result).toEqual({ isSuccess: true, content: 'ok', receivedAt: 3 });
    moorex.close();
  });
});
