import { BehaviorSubject, Observable, Subject, isObservable, type Subscription } from 'rxjs';

/**
 * An effect in the seed's own form: `start` runs it, dispatching inputs as it goes, and settles
 * when it is done (a rejection is a failure); `cancel` stops it.
 */
export interface MoorexEffectController<Input> {
  start(dispatch: (input: Input) => void): Promise<void>;
  cancel(): void;
}

/** A running effect: the seed's `{start, cancel}`, or an Observable of inputs (unsubscribing cancels it). */
export type MoorexEffectRun<Input> = MoorexEffectController<Input> | Observable<Input>;

/** What `createMoorex` needs: the Moore machine (initial state, curried transition) and its effects. */
export interface MoorexDefinition<State, Input, Effect> {
  /** The state to start from (a restored one resumes its effects), or a function returning it. */
  initial: State | (() => State);
  /** Pure; returns the same object when the input does not apply (nothing changes, nothing is emitted). */
  transition: (input: Input) => (state: State) => State;
  /** The effects due in a state, by key. Pure. The key is the effect's identity across states. */
  effectsAt: (state: State) => Readonly<Record<string, Effect>>;
  /** Runs one effect; `state` is the state in which it started. */
  runEffect: (effect: Effect, state: State, key: string) => MoorexEffectRun<Input>;
}

/** A change in the running effects. `failed` carries the error. */
export interface MoorexEffectEvent<Effect> {
  type: 'started' | 'completed' | 'canceled' | 'failed';
  key: string;
  effect: Effect;
  error?: unknown;
}

/** A running Moorex. */
export interface Moorex<State, Input, Effect> {
  /** Applies an input (queued behind any input being applied). Ignored after `close()`. */
  dispatch(input: Input): void;
  /** The current state. */
  current(): State;
  /** The current state, then each new state object. Completes on `close()`. */
  readonly state$: Observable<State>;
  /** A `started` event for each effect running at subscription, then every change. Completes on `close()`. */
  readonly effects$: Observable<MoorexEffectEvent<Effect>>;
  /** Cancels every running effect and completes both observables. */
  close(): void;
}

interface Running<Effect> {
  readonly effect: Effect;
  /** Cancels the run; replaced once the run has started. */
  stop: () => void;
}

/**
 * A Moore machine whose effects follow its state (the Moorex model of seed 004), on rxjs.
 *
 * 1. The state starts at `initial`; each dispatched input folds it with `transition(input)(state)`.
 * 2. On every state change, and once at creation, the effects are reconciled by key against
 *    `effectsAt(state)`: a new key starts (`runEffect`), a vanished key is cancelled, a key that stays
 *    is neither restarted nor cancelled. So a restored state restarts exactly what it still needs.
 * 3. A completed or failed effect leaves the running set once the inputs it dispatched are applied:
 *    if its key is still due then, it starts again at the next state change (as in Moorex). An effect whose own input makes its key vanish is
 *    cancelled like any other (its work is done, so this is harmless).
 * 4. Inputs dispatched while an input is being applied, while effects are reconciled, or from an
 *    observer of `state$` / `effects$` are queued and applied in order: reconciliation never re-enters.
 *    Inputs from an effect that is no longer running (cancelled, completed) are ignored.
 * 5. An effect that fails (`runEffect` or `start` throws, `start` rejects, the Observable errors, or
 *    its cancellation throws) is reported as `failed`; the other effects and the Moorex carry on.
 *
 * `transition` and `effectsAt` must not throw (runestream's machines never do); if one does, the
 * error reaches the caller of `dispatch` and the inputs still queued are applied at the next dispatch.
 *
 * ## Example
 * ```ts
 * import { interval, map } from 'rxjs';
 * import { createMoorex } from 'runestream';
 *
 * type Tick = { type: 'tick' };
 * // A counter that wants a ticker until it reaches 3.
 * const moorex = createMoorex({
 *   initial: { count: 0 },
 *   transition: (_: Tick) => (state: { count: number }) => ({ count: state.count + 1 }),
 *   effectsAt: (state): Record<string, { everyMs: number }> => (state.count < 3 ? { ticker: { everyMs: 10 } } : {}),
 *   runEffect: (effect) => interval(effect.everyMs).pipe(map((): Tick => ({ type: 'tick' }))),
 * });
 * moorex.state$.subscribe((s) => console.log('count', s.count));
 * moorex.effects$.subscribe((e) => console.log(e.type, e.key));
 * // Logs:
 * // count 0
 * // started ticker
 * // count 1
 * // count 2
 * // canceled ticker
 * // count 3
 * ```
 *
 * @see reactAgentEffectsAt and agentTransition, the ReAct agent written for it.
 */
export function createMoorex<State, Input, Effect>(definition: MoorexDefinition<State, Input, Effect>): Moorex<State, Input, Effect> {
  const { transition, effectsAt, runEffect } = definition;
  let state: State = typeof definition.initial === 'function' ? (definition.initial as () => State)() : definition.initial;
  const running = new Map<string, Running<Effect>>();
  /** Inputs to apply and effect settlements, in the order they happened. */
  const queue: Array<() => void> = [];
  let draining = false;
  let closed = false;
  const state$ = new BehaviorSubject<State>(state);
  const events = new Subject<MoorexEffectEvent<Effect>>();

  /** Runs `work`, then applies every queued input, unless a caller up the stack is already doing so. */
  const serialize = (work: () => void): void => {
    if (draining) {
      work();
      return;
    }
    draining = true;
    try {
      work();
      while (!closed && queue.length > 0) queue.shift()!();
    } finally {
      draining = false;
    }
  };

  const apply = (input: Input): void => {
    const next = transition(input)(state);
    if (next === state) return;
    state = next;
    reconcile();
    state$.next(state);
  };

  const reconcile = (): void => {
    const due = effectsAt(state);
    for (const [key, entry] of running) if (!Object.hasOwn(due, key)) cancel(key, entry);
    for (const [key, effect] of Object.entries(due)) {
      if (closed) return; // an effect's start may close the Moorex
      if (!running.has(key)) start(key, effect);
    }
  };

  const start = (key: string, effect: Effect): void => {
    const entry: Running<Effect> = { effect, stop: () => {} };
    running.set(key, entry);
    events.next({ type: 'started', key, effect });
    const isCurrent = (): boolean => running.get(key) === entry;
    // Queued behind the inputs the effect dispatched: while they are applied its key is still
    // running, so an effect that emits and completes at once is not restarted by its own inputs.
    const settle = (outcome: { type: 'completed' } | { type: 'failed'; error: unknown }): void =>
      serialize(() =>
        queue.push(() => {
          if (!isCurrent()) return; // already cancelled, or settled
          running.delete(key);
          events.next({ ...outcome, key, effect });
        }),
      );
    const dispatchFromEffect = (input: Input): void => {
      if (isCurrent()) dispatch(input);
    };
    try {
      const run = runEffect(effect, state, key);
      if (isObservable(run)) {
        const subscription: Subscription = run.subscribe({
          next: dispatchFromEffect,
          error: (error: unknown) => settle({ type: 'failed', error }),
          complete: () => settle({ type: 'completed' }),
        });
        entry.stop = () => subscription.unsubscribe();
      } else {
        entry.stop = () => run.cancel();
        Promise.resolve(run.start(dispatchFromEffect)).then(
          () => settle({ type: 'completed' }),
          (error: unknown) => settle({ type: 'failed', error }),
        );
      }
    } catch (error) {
      settle({ type: 'failed', error });
    }
  };

  const cancel = (key: string, entry: Running<Effect>): void => {
    running.delete(key); // first: whatever the run does while stopping is ignored
    try {
      entry.stop();
      events.next({ type: 'canceled', key, effect: entry.effect });
    } catch (error) {
      events.next({ type: 'failed', key, effect: entry.effect, error });
    }
  };

  const dispatch = (input: Input): void => {
    if (closed) return;
    serialize(() => queue.push(() => apply(input)));
  };

  const effects$ = new Observable<MoorexEffectEvent<Effect>>((subscriber) => {
    let live: Subscription | undefined;
    // Serialized, so an input dispatched by this subscriber while it hears the running effects is
    // applied only once it also hears the live events.
    serialize(() => {
      for (const [key, { effect }] of running) subscriber.next({ type: 'started', key, effect });
      live = events.subscribe(subscriber);
    });
    return () => live?.unsubscribe();
  });

  serialize(reconcile);

  return {
    dispatch,
    current: () => state,
    state$: state$.asObservable(),
    effects$,
    close: () => {
      if (closed) return;
      closed = true;
      queue.length = 0;
      for (const [key, entry] of running) cancel(key, entry);
      state$.complete();
      events.complete();
    },
  };
}
