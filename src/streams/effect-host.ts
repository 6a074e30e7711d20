import { EMPTY, Observable, Subscription, defer, isObservable, retry, startWith, switchMap, timer } from 'rxjs';
import type { AnyMachine } from '../reducers/machine.js';
import { SPAWN_EVENT_TYPE, isRuneOf, type RuneOf } from '../reducers/rune.js';
import type { DispatchCommand, Epic, EpicCommand, EpicContext } from './epic.js';
import { ArmedDeadline, deadlineSpecOf, type DeadlineSpec } from './durable-deadline.js';
import { KeyedListeners } from './keyed-listeners.js';
import { viewOfHead, viewOfRune, type EffectsByKey, type LaterRunes, type StateEffects, type StreamView } from './state-effects.js';

/**
 * Which streams' effects this process runs. In one process, all of them (no ownership given);
 * several processes sharing one log split the streams by lease and say so here, and the effect
 * host follows without any epic changing.
 */
export interface EffectOwnership {
  /** Whether this process runs `stream`'s effects now. */
  owns(stream: string): boolean;
  /**
   * Emits when `owns` may answer differently: the host cancels the effects of streams it lost
   * and resumes, from the store, those of streams it gained (as after a restart).
   */
  readonly changes$?: Observable<unknown>;
}

/** Dispatches what an effect of `stream` emitted (an event, or a command); `by` a timer when a deadline fired. */
type Emit = (stream: string, out: unknown, by?: 'timer') => void;

/** One running (or finished, key still due) effect of a stream. */
interface Slot {
  readonly key: string;
  /** Stops it; `by` is the rune that made it stop, if one did. */
  stop(by: RuneOf<AnyMachine> | undefined): void;
}

/** An effect that is an Observable: subscribed. */
class SubscribedSlot implements Slot {
  subscription: Subscription | undefined;
  constructor(
    readonly key: string,
    /** The view it started with: told which rune cancels it. */
    private readonly view: StreamView<AnyMachine>,
  ) {}
  stop(by: RuneOf<AnyMachine> | undefined): void {
    if (by !== undefined) this.view.cancelledBy = by;
    this.subscription?.unsubscribe();
  }
}

/** An effect that is a `durableDeadline` as it is: armed on the shared wheel, no subscription (a million idle streams hold one each). */
class DeadlineSlot extends ArmedDeadline implements Slot {
  constructor(
    readonly key: string,
    spec: DeadlineSpec,
    private readonly stream: string,
    private readonly emit: Emit,
  ) {
    super(spec);
  }
  protected due(value: unknown): void {
    this.emit(this.stream, value, 'timer');
  }
  stop(): void {
    this.disarm();
  }
}

/** The effects of one stream in one of the declaration's states: a few keys, so an array. */
interface StreamEffects {
  /** Replaced, not pushed to, when one is added (see {@link addSlot}). */
  slots: Slot[];
  /** Bumped by every reconciliation: an outer one, re-entered through a synchronous dispatch, stops. */
  generation: number;
}

const slotOf = (effects: StreamEffects, key: string): Slot | undefined => effects.slots.find((slot) => slot.key === key);

/** Adds a slot in an array of its exact size: a pushed-to empty array reserves 17, and a million idle streams hold one slot each. */
const addSlot = (effects: StreamEffects, slot: Slot): void => {
  effects.slots = effects.slots.length === 0 ? [slot] : [...effects.slots, slot];
};

const removeSlot = (effects: StreamEffects, slot: Slot): void => {
  const index = effects.slots.indexOf(slot);
  if (index >= 0) effects.slots.splice(index, 1);
};

/** A listing of stored heads that fails is tried again after this much, doubling up to 30 s. */
const LISTING_RETRY_MS = 1000;
const LISTING_RETRY_MAX_MS = 30_000;

const isCommand = (value: object): value is EpicCommand => 'stream' in value && ('event' in value || 'spawn' in value);

/**
 * Turns a declaration of state-derived effects into an epic that keeps them reconciled, for every
 * stream of its machine that this process owns (the Moorex model, over a whole log):
 *
 * 1. On every live rune of the machine, `effects(view)` is asked what is due in the stream's new
 *    state: a new key starts (its Observable is subscribed), a vanished key is cancelled
 *    (unsubscribed), a kept key runs on untouched (a finished one is not started again until its
 *    key vanishes and comes back). A rune for which `restartOn` holds restarts the kept ones; one
 *    of the `unchangedBy` events that keeps the state name changes nothing, `effects` not asked.
 * 2. At start, the stored streams in the declaration's `states` (all of the machine's, with
 *    `'any'`) are listed from their heads (no hydration, unless `withState`: then `view.state` is
 *    read first) and their effects started as `resumed`: nothing is left hanging after a restart,
 *    and no epic keeps a flag or a listing of its own. A stream heard live while the listing runs
 *    is left to its live rune, and so is one whose listed head is a rune this engine has stored
 *    and not yet published (`context.unpublishedSeq`): the listing read it first. A listing that
 *    fails is tried again (1 s, doubling to 30 s). Every change of ownership lists again.
 * 3. A stream first heard by a rune that does not change its state name was in that state before
 *    this process took it over: its effects start as `resumed` too.
 * 4. What an effect emits is dispatched: a bare event to its own stream. An effect that must hear
 *    its stream's later runes subscribes `view.later$`: each live rune reaches it before the
 *    rune's own reconciliation (so an effect a rune cancels has heard it).
 * 5. An `effects` that throws or gives something that is not an Observable, and an effect that
 *    errors, are reported (`effect_failed`, with the epic's name, the stream and the key) through
 *    `context.report`; no other key or stream stops.
 * 6. With `context.ownership`, only owned streams run effects; on its `changes$`, effects of lost
 *    streams are cancelled and gained ones resumed from the store. A declaration with
 *    `everyProcess` (effects that keep this process's own state) runs in every process for every
 *    stream, from `context.allRunes$`.
 *
 * The returned epic is a plain function: test it with a hot observable of runes and a context,
 * no engine needed.
 *
 * ## Example
 * ```ts
 * import { createEngine, durableDeadline, stateEffects, toolCall } from 'runestream';
 * // A call left waiting for approval gets `approval_timeout` a minute after it started waiting, across restarts.
 * const approvalTimeout = stateEffects({
 *   name: 'approvalTimeout',
 *   machine: toolCall,
 *   states: ['awaiting_approval'],
 *   effects: (view, context) => ({ timeout: durableDeadline(view.at + 60_000, { type: 'approval_timeout' as const }, context) }),
 * });
 * const engine = createEngine({ epics: [approvalTimeout] });
 * await engine.close();
 * ```
 */
export function stateEffects<M extends AnyMachine, Deps = unknown>(declaration: StateEffects<M, Deps>): Epic<Deps> {
  const { name, machine, states, restartOn, withState = false, everyProcess = false } = declaration;
  const unchangedBy = new Set<string>(declaration.unchangedBy ?? []);
  const anyState = states === 'any';
  const inStates = new Set<string>(anyState ? [] : states);
  const epic = (runes$: Observable<unknown>, context: EpicContext, deps: Deps): Observable<EpicCommand> =>
    new Observable<EpicCommand>((subscriber) => {
      // Effects that keep this process's own state run for every stream, whoever owns it.
      const ownership = everyProcess ? undefined : context.ownership;
      const owns = (stream: string): boolean => ownership === undefined || ownership.owns(stream);
      const source$ = everyProcess ? (context.allRunes$ ?? runes$) : runes$;
      const streams = new Map<string, StreamEffects>();
      /** With `withState`, streams not in memory whose state is read before their effects are decided. */
      const hydrating = new Map<string, Subscription>();
      const stopHydrating = (stream: string): void => {
        hydrating.get(stream)?.unsubscribe();
        hydrating.delete(stream);
      };
      /** Streams heard live while a listing runs: the listing's head of them may be older. */
      let heardLive: Set<string> | undefined;
      /** The subscribers of views' `later$`, by stream: an entry only while one is subscribed. */
      const laterListeners = new KeyedListeners<RuneOf<M>>();
      const later: LaterRunes<M> = (stream, afterSeq) =>
        new Observable<RuneOf<M>>((listener) =>
          laterListeners.add(stream, {
            next: (rune) => {
              if (rune.seq > afterSeq) listener.next(rune);
            },
            complete: () => listener.complete(),
          }),
        );

      const fail = (stream: string, key: string | undefined, error: unknown): void =>
        context.report?.({ type: 'effect_failed', epic: name, stream, ...(key === undefined ? {} : { key }), error });

      const emit: Emit = (stream, out, by) => {
        const command: EpicCommand = typeof out === 'object' && out !== null && isCommand(out) ? out : { stream, event: out as DispatchCommand['event'] };
        subscriber.next(by === undefined || command.by !== undefined ? command : { ...command, by });
      };

      /** Stops every effect of a stream: it left the declaration's states (`by`), or this host stops or lost it. */
      const cancelAll = (stream: string, effects: StreamEffects | undefined, by: RuneOf<M> | undefined): void => {
        stopHydrating(stream);
        if (effects === undefined) return;
        effects.generation++;
        const slots = effects.slots.splice(0);
        if (streams.get(stream) === effects) streams.delete(stream);
        for (const slot of slots) slot.stop(by);
      };

      const start = (view: StreamView<M>, effects: StreamEffects, key: string, effect$: Observable<unknown>): void => {
        const { stream } = view;
        const deadline = deadlineSpecOf(effect$);
        if (deadline !== undefined) {
          const slot = new DeadlineSlot(key, deadline, stream, emit);
          addSlot(effects, slot);
          slot.arm();
          return;
        }
        const slot = new SubscribedSlot(key, view);
        addSlot(effects, slot);
        const subscription = effect$.subscribe({ next: (out) => emit(stream, out), error: (error: unknown) => fail(stream, key, error) });
        // Cancelled while it started (its own dispatch moved the stream on): stop it now.
        if (effects.slots.includes(slot)) slot.subscription = subscription;
        else subscription.unsubscribe();
      };

      const reconcile = (view: StreamView<M>): void => {
        const { stream } = view;
        let due: EffectsByKey<M>;
        try {
          due = declaration.effects(view, context, deps);
          if (typeof due !== 'object' || due === null) throw new TypeError(`effects must return an object of Observables by key, got ${due === null ? 'null' : typeof due}`);
        } catch (error) {
          fail(stream, undefined, error);
          return;
        }
        let effects = streams.get(stream);
        if (effects === undefined) streams.set(stream, (effects = { slots: [], generation: 0 }));
        const generation = ++effects.generation;
        for (const slot of [...effects.slots]) {
          if (Object.hasOwn(due, slot.key) && due[slot.key] !== undefined) continue;
          removeSlot(effects, slot);
          slot.stop(view.rune);
        }
        for (const key of Object.keys(due)) {
          const effect$ = due[key];
          if (effect$ === undefined || slotOf(effects, key) !== undefined) continue;
          if (!isObservable(effect$)) {
            fail(stream, key, new TypeError(`effect "${key}" is not an Observable (got ${effect$ === null ? 'null' : typeof effect$})`));
            continue;
          }
          try {
            start(view, effects, key, effect$);
          } catch (error) {
            fail(stream, key, error);
          }
          // A synchronous dispatch reconciled this stream again: that newer view decides the rest.
          if (effects.generation !== generation) return;
        }
      };

      /**
       * Reconciles a view, with its state first when the declaration asks for it: from memory, else
       * hydrated (a newer view of the stream, or its end, drops a hydration still under way).
       */
      const reconcileView = (view: StreamView<M>): void => {
        if (!withState) return reconcile(view);
        const { stream } = view;
        stopHydrating(stream);
        const inMemory = context.state(stream, machine);
        if (inMemory !== undefined) return reconcile({ ...view, state: inMemory });
        const subscription = view.state$.subscribe({
          next: (state) => {
            hydrating.delete(stream);
            if (state !== undefined) reconcile({ ...view, state });
          },
          error: (error: unknown) => {
            hydrating.delete(stream);
            fail(stream, undefined, error);
          },
        });
        if (!subscription.closed) hydrating.set(stream, subscription);
      };

      const onRune = (rune: RuneOf<M>): void => {
        const { stream } = rune;
        if (!owns(stream)) return;
        heardLive?.add(stream);
        laterListeners.next(stream, rune);
        const effects = streams.get(stream);
        if (!anyState && rune.to !== undefined && !inStates.has(rune.to)) {
          cancelAll(stream, effects, rune);
          return;
        }
        const restarts = effects !== undefined && restartOn?.(rune) === true;
        if (effects !== undefined && !restarts && rune.from === rune.to && unchangedBy.has(rune.event.type)) return;
        if (restarts) for (const slot of effects!.slots.splice(0)) slot.stop(rune);
        const entered = rune.event.type === SPAWN_EVENT_TYPE || rune.from !== rune.to || rune.to === undefined;
        reconcileView(viewOfRune(machine, rune, effects !== undefined || entered ? 'live' : 'resumed', context, later));
      };

      /** The stored streams in the declaration's states, resumed from their heads. */
      const listing$ = (): Observable<never> =>
        !anyState && states.length === 0
          ? EMPTY
          : new Observable<never>((listing) => {
              heardLive = new Set();
              const heads = defer(() => context.streams(anyState ? { machine: machine.id } : { machine: machine.id, values: states }))
                .pipe(retry({ delay: (_error: unknown, attempt: number) => timer(Math.min(LISTING_RETRY_MAX_MS, LISTING_RETRY_MS * 2 ** (attempt - 1)), context.scheduler) }))
                .subscribe({
                  next: (head) => {
                    if (heardLive?.has(head.stream) || streams.has(head.stream) || hydrating.has(head.stream) || !owns(head.stream)) return;
                    // Stored by this engine and not yet published: its live rune is on its way, and decides.
                    const unpublished = context.unpublishedSeq?.(head.stream);
                    if (unpublished !== undefined && head.seq <= unpublished) return;
                    reconcileView(viewOfHead(machine, head, context, later));
                  },
                  complete: () => {
                    heardLive = undefined;
                    listing.complete();
                  },
                });
              return () => {
                heads.unsubscribe();
                heardLive = undefined;
              };
            });

      const subscription = new Subscription();
      subscription.add(
        (source$ as Observable<RuneOf<M>>).subscribe((rune) => {
          if (isRuneOf(machine, rune)) onRune(rune);
        }),
      );
      const changes$ = ownership?.changes$ ?? EMPTY;
      subscription.add(
        changes$
          .pipe(
            startWith(undefined),
            switchMap((_, index) => {
              if (index > 0) {
                for (const [stream, effects] of [...streams]) if (!owns(stream)) cancelAll(stream, effects, undefined);
                for (const stream of [...hydrating.keys()]) if (!owns(stream)) stopHydrating(stream);
              }
              return listing$();
            }),
          )
          .subscribe(),
      );
      return () => {
        subscription.unsubscribe();
        for (const stream of [...hydrating.keys()]) stopHydrating(stream);
        for (const [stream, effects] of [...streams]) cancelAll(stream, effects, undefined);
        laterListeners.complete();
      };
    });
  Object.defineProperty(epic, 'name', { value: name });
  return epic as Epic<Deps>;
}
