import { Observable, ReplaySubject, Subject, share, using } from 'rxjs';
import { foldRune } from '../../reducers/fold.js';
import type { AnyMachine } from '../../reducers/machine.js';
import { SPAWN_EVENT_TYPE, type Rune } from '../../reducers/rune.js';
import { ClientError } from './errors.js';

/** What became of a rune handed to {@link StreamView.applyRune}. */
export type RuneOutcome = 'applied' | 'duplicate' | 'gap';

/** Called when a view gets its first subscriber, and when its last one leaves. */
export interface StreamViewHooks {
  watch(view: StreamView): void;
  unwatch(view: StreamView): void;
}

/**
 * The client's copy of one stream: its last seq, its state folded from the server's snapshot and
 * the runes after it, and the subscribers of `state$` and `runes$`, counted together.
 *
 * 1. The first subscriber of either calls `hooks.watch` (the client subscribes on the wire); the
 *    last one to leave calls `hooks.unwatch`. rxjs `share` does the counting.
 * 2. A snapshot replaces the state and sets the last seq, whatever the seq: the server is the
 *    authority (a seq below the last one seen means its log is behind this client's, e.g. a
 *    server restarted on an empty memory store, and the snapshot resets the client).
 * 3. A rune with the next seq is folded with the machine it names and emitted; one at or below the
 *    last seq is a duplicate and dropped; one further on is a gap and dropped (the client resyncs).
 */
export class StreamView {
  /** The seq of the last rune folded into the state (or of the snapshot it came from). */
  lastSeq = 0;
  /** Whether a snapshot or the spawn rune has given the state a base to fold onto. */
  hasBase = false;
  /** Whether `subscribe` was sent on the current socket (and applied to the connection machine). */
  subscribedOnWire = false;
  /** Whether a resubscribe after a gap is under way: further gaps are expected and not reported again. */
  resyncing = false;

  private state: unknown;
  private stateFailed = false;
  private readonly states = new ReplaySubject<unknown>(1);
  private readonly deriveds = new ReplaySubject<unknown>(1);
  private readonly runes = new Subject<Rune>();
  private readonly lease$ = new Observable<never>(() => {
    this.hooks.watch(this);
    return () => this.hooks.unwatch(this);
  }).pipe(share());

  /** The state: the current one to a late subscriber, then every change. */
  readonly state$: Observable<unknown> = using(
    () => this.lease$.subscribe(),
    () => this.states,
  );
  /** The view derived from each state (its machine's `derive`; `undefined` without one), beside `state$`. */
  readonly derived$: Observable<unknown> = using(
    () => this.lease$.subscribe(),
    () => this.deriveds,
  );
  /** Every rune from now on, once each, in seq order. */
  readonly runes$: Observable<Rune> = using(
    () => this.lease$.subscribe(),
    () => this.runes,
  );

  constructor(
    readonly stream: string,
    private readonly machines: Readonly<Record<string, AnyMachine>>,
    private readonly hooks: StreamViewHooks,
  ) {}

  /** Replaces the state with the server's as of `seq` (and its derived view); the next rune is `seq + 1`. */
  applySnapshot(seq: number, state: unknown, derived?: unknown): void {
    this.lastSeq = seq;
    this.hasBase = true;
    this.resyncing = false;
    this.setState(state, derived);
  }

  /** Folds the rune into the state and emits both, if it is the next one. */
  applyRune(rune: Rune): RuneOutcome {
    const isSpawn = rune.event.type === SPAWN_EVENT_TYPE;
    if (this.hasBase && rune.seq <= this.lastSeq) return 'duplicate';
    const follows = this.hasBase ? rune.seq === this.lastSeq + 1 : rune.seq === 1 && isSpawn;
    if (!follows) return 'gap';
    this.lastSeq = rune.seq;
    this.hasBase = true;
    this.resyncing = false;
    this.fold(rune);
    this.runes.next(rune);
    return 'applied';
  }

  /** Errors every subscriber (the server refused the stream). */
  fail(error: ClientError): void {
    this.states.error(error);
    this.deriveds.error(error);
    this.runes.error(error);
  }

  /** Completes every subscriber (the client closed). */
  complete(): void {
    this.states.complete();
    this.deriveds.complete();
    this.runes.complete();
  }

  private fold(rune: Rune): void {
    if (this.stateFailed) return;
    const machine = Object.hasOwn(this.machines, rune.machine) ? this.machines[rune.machine] : undefined;
    if (machine === undefined) {
      // runes$ does not need the machine and carries on; only the state cannot be known any more.
      this.stateFailed = true;
      const error = new ClientError(
        'unknown_machine',
        `stream "${this.stream}": rune ${rune.seq} is of machine "${rune.machine}", which this client does not know; pass it in options.machines`,
        this.stream,
      );
      this.states.error(error);
      this.deriveds.error(error);
      return;
    }
    // The engine's fold: the client's state is what the engine would hydrate from the same runes.
    const next = foldRune(machine, this.state, rune.seq, rune.event);
    // The same object: the machine did not change (it emits only on change).
    if (next !== this.state) this.setState(next, machine.derive?.(next));
  }

  private setState(state: unknown, derived: unknown): void {
    if (this.stateFailed) return;
    this.state = state;
    this.states.next(state);
    this.deriveds.next(derived);
  }
}
