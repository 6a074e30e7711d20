import { Observable, defer, map, of, take } from 'rxjs';
import type { AnyMachine, EventOf, StateOf } from '../reducers/machine.js';
import type { RuneOf, StateNameOf } from '../reducers/rune.js';
import type { EpicCommand, EpicContext } from './epic.js';
import type { StreamHead } from './store.js';

/**
 * How a stream's effects came to be started:
 * - `live`: a rune this process heard took the stream into its state;
 * - `resumed`: the stream was already in its state when this process took it over (found in the
 *   store at start, after a restart, or on gaining its ownership; or first heard by a rune that did
 *   not change its state name). Whatever ran for it before died with another process, or was torn down.
 */
export type EffectOrigin = 'live' | 'resumed';

/**
 * What a declaration's `effects` sees of a stream: its head (state name, seq, time of its last
 * rune), how it got here, and its state on demand. Decided from the head alone, so a stream found
 * in the store at start is not hydrated unless one of its effects asks for `state$`.
 */
export interface StreamView<M extends AnyMachine> {
  readonly stream: string;
  /** The state name after the last rune (`undefined` for a machine without names). */
  readonly value: StateNameOf<M> | undefined;
  /** The seq of the last rune. */
  readonly seq: number;
  /** The `at` of the last rune: durable deadlines are computed from it. */
  readonly at: number;
  readonly origin: EffectOrigin;
  /** The rune that led here, when `live` (or resumed by a rune heard live). */
  readonly rune?: RuneOf<M>;
  /** The stream's durable state, then completes: from memory when it is there, else hydrated. */
  readonly state$: Observable<StateOf<M> | undefined>;
  /** The stream's last rune, then completes: the live one, else read from the store. */
  readonly lastRune$: Observable<RuneOf<M> | undefined>;
  /**
   * The stream's live runes after this view's (seq above `seq`), as this process hears them, for
   * as long as it is subscribed: how a long-running effect hears what happens to its stream later
   * (an agent CLI's process is told the user's answers). Hot: nothing before it is subscribed is
   * replayed, so subscribe it when the effect starts. Never completes on its own. Served from one
   * listener list per subscribed stream: a stream whose effects do not ask for it costs nothing.
   */
  readonly later$: Observable<RuneOf<M>>;
  /**
   * The stream's state, when the declaration asks for it (`withState`): from memory for a live
   * rune, else hydrated before `effects` is asked. Absent otherwise.
   */
  readonly state?: StateOf<M>;
  /**
   * The rune that cancels effects started with this view, set just before they are unsubscribed:
   * a teardown can say why it stops (a tool's abort reason). Unset when they stop for any other
   * reason (the engine closed, the stream's ownership moved).
   */
  cancelledBy?: RuneOf<M>;
}

/**
 * One effect: a cold Observable, subscribed when its key appears and unsubscribed when the key
 * vanishes. What it emits is dispatched: a bare event to its own stream, a command where it says.
 */
export type Effect<M extends AnyMachine> = Observable<EventOf<M> | EpicCommand>;

/**
 * What a machine's effects are in a state: effects by key. The key is an effect's identity across
 * runes. A key whose value is `undefined` is not due, as if it were absent.
 */
export type EffectsByKey<M extends AnyMachine> = Readonly<Record<string, Effect<M> | undefined>>;

/**
 * Effects declared as a function of a stream's state (the Moorex model): the engine keeps every
 * stream of `machine` reconciled with them (see {@link stateEffects}).
 */
export interface StateEffects<M extends AnyMachine, Deps = unknown> {
  /** The name failures are reported under. */
  readonly name: string;
  readonly machine: M;
  /**
   * The state names in which a stream may have effects: at start the engine lists the stored
   * streams in these states (a query on heads, no hydration) and resumes their effects. `'any'`:
   * every stream of the machine, whatever its state (a data-state machine, which has no names).
   */
  readonly states: readonly StateNameOf<M>[] | 'any';
  /**
   * Whether `effects` needs the stream's whole state as `view.state`. Then a stream found in the
   * store at start is hydrated before its effects are decided (so use it where few streams are
   * listed, or every one needs its state anyway). Default false: decided from the head.
   */
  readonly withState?: boolean;
  /**
   * The effects due in a stream's state, by key. Pure: it builds cold Observables and does not
   * subscribe to them. Keys decided from `value`, `seq`, `at`, `origin` and `rune` need no
   * hydration; an effect that needs the whole state reads `view.state$` when it runs.
   */
  effects(view: StreamView<M>, context: EpicContext, deps: Deps): EffectsByKey<M>;
  /**
   * Whether the effects keep this process's own state (a role's live profile, a cache) rather
   * than act on the world: then every process that shares the log runs them for every stream,
   * whoever owns it (see `EffectOwnership`). Default false: only the stream's owner runs them.
   */
  readonly everyProcess?: boolean;
  /**
   * A live rune for which this is true restarts the stream's running effects (their keys kept):
   * a chat actor's Ping restarts its inactivity clock, an operator's `manual_keep_open` a
   * breaker's. Default: none does.
   */
  readonly restartOn?: (rune: RuneOf<M>) => boolean;
  /**
   * Events that never change what is due: a live rune of one of these types that keeps its
   * stream's state name, once the stream's effects are reconciled in this process, reaches
   * `later$` listeners and leaves the effects as they are, `effects` not asked (a turn's text
   * deltas, many a turn). Default: none: every rune is reconciled.
   */
  readonly unchangedBy?: readonly EventOf<M>['type'][];
}

/** A stream's live runes after `afterSeq`, as the effect host hears them (see {@link StreamView.later$}). */
export type LaterRunes<M extends AnyMachine> = (stream: string, afterSeq: number) => Observable<RuneOf<M>>;

/** The view of a stream a live rune led to; `origin` as the host decided it. */
export function viewOfRune<M extends AnyMachine>(machine: M, rune: RuneOf<M>, origin: EffectOrigin, context: EpicContext, later: LaterRunes<M>): StreamView<M> {
  const { stream } = rune;
  return {
    stream,
    value: rune.to as StateNameOf<M> | undefined,
    seq: rune.seq,
    at: rune.at,
    origin,
    rune,
    state$: stateOf$(machine, stream, context),
    lastRune$: of(rune),
    later$: later(stream, rune.seq),
  };
}

/** The view of a stream found in the store: its head, nothing hydrated. */
export function viewOfHead<M extends AnyMachine>(machine: M, head: StreamHead, context: EpicContext, later: LaterRunes<M>): StreamView<M> {
  const { stream, seq } = head;
  return {
    stream,
    value: head.value as StateNameOf<M> | undefined,
    seq,
    at: head.at,
    origin: 'resumed',
    state$: stateOf$(machine, stream, context),
    lastRune$: storedLastRune$(stream, seq, context) as Observable<RuneOf<M> | undefined>,
    later$: later(stream, seq),
  };
}

/**
 * A stream's last rune, read from the store when subscribed. One Observable and one closure over
 * three values: a deadline armed from a head may hold it until it is due, a million of them at once.
 */
export const storedLastRune$ = (stream: string, seq: number, context: EpicContext): Observable<RuneOf<AnyMachine> | undefined> =>
  new Observable((subscriber) =>
    context
      .read(stream, seq - 1)
      .pipe(take(1))
      .subscribe(subscriber),
  );

/** A stream's state: synchronously from memory when it is there (so an effect starts in the rune's own tick), else hydrated. */
const stateOf$ = <M extends AnyMachine>(machine: M, stream: string, context: EpicContext): Observable<StateOf<M> | undefined> =>
  defer(() => {
    const inMemory = context.state(stream, machine);
    return inMemory !== undefined ? of(inMemory) : context.snapshot(stream, machine).pipe(map((snapshot) => snapshot?.state));
  });
