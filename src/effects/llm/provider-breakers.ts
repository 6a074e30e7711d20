import { Observable, filter, firstValueFrom, lastValueFrom, toArray } from 'rxjs';
import { circuitBreaker } from '../../reducers/circuit-breaker/machine.js';
import type { RuneOf } from '../../reducers/rune.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';
import { timerWheel } from '../../streams/timer-wheel.js';
import type { Provider } from './model-types.js';
import { providerBreakerStream, type ProviderChain } from './provider-chain.js';
import { storedHeads } from '../stored-heads.js';

/** Options of {@link providerBreakers}, with their defaults. A {@link ProviderChain} is one too. */
export interface ProviderBreakersOptions {
  /**
   * Whose breakers to time: provider names, or providers (so a chain can be passed as it is).
   * Default: every `circuit-breaker` stream whose id starts with `provider/`.
   */
  readonly providers?: readonly (string | Pick<Provider, 'name'>)[];
  /** How late an open timeout may fire: the timer wheel's bucket size. Default 1 ms (breakers are few). */
  readonly resolutionMs?: number;
}

/** A dispatched `open_timeout_elapsed` that left no rune (the store failed) is sent again this much later, at most a minute. */
const retryDelayOf = (openTimeoutMs: number): number => Math.min(60_000, Math.max(1000, openTimeoutMs));

type BreakerRune = RuneOf<typeof circuitBreaker>;

/** Whether a breaker rune starts its OPEN clock: it entered OPEN, or an operator kept it open. */
const startsOpenClock = (rune: BreakerRune): boolean =>
  rune.to === 'OPEN' && (rune.from !== 'OPEN' || rune.event.type === 'manual_keep_open');

/**
 * When the OPEN clock of a breaker that is OPEN as of `lastSeq` started: the `at` of its latest
 * rune that {@link startsOpenClock}, searched backwards through its history in growing pages (a
 * breaker forced through while OPEN records a rune per call). `fallbackAt` if the history holding
 * it was pruned.
 */
async function openClockStart(context: Pick<EpicContext, 'read'>, stream: string, lastSeq: number, fallbackAt: number): Promise<number> {
  for (let span = 16; ; span *= 8) {
    const afterSeq = Math.max(0, lastSeq - span);
    const runes = await lastValueFrom(context.read(stream, afterSeq).pipe(ofMachine(circuitBreaker), toArray()));
    for (let i = runes.length - 1; i >= 0; i--) {
      const rune = runes[i]!;
      if (rune.seq <= lastSeq && startsOpenClock(rune)) return rune.at;
    }
    if (afterSeq === 0) return fallbackAt;
  }
}

/**
 * The timer of the providers' circuit breakers, as an epic: it half-opens a breaker
 * `openTimeoutMs` after it went OPEN.
 *
 * 1. A live rune that takes a provider's breaker to OPEN (or an operator's `manual_keep_open`)
 *    arms its clock: the rune's `at` plus the breaker's own `openTimeoutMs` (from its state, as
 *    it was spawned). When it is due, the epic dispatches `open_timeout_elapsed`. A rune that
 *    leaves OPEN disarms it; the outcome of a call forced through an OPEN breaker does not move it.
 * 2. The deadline lives in the log: when the epic starts (after a restart, say) it lists every
 *    OPEN breaker (`context.streams({machine: 'circuit-breaker', values: ['OPEN']})`) and arms
 *    each at its original deadline, from the rune that opened it, or fires at once if that has
 *    passed.
 * 3. A timeout whose dispatch left no rune is sent again a little later (its timeout, between 1 s
 *    and a minute); the breaker's rune ends the clock.
 *
 * All clocks share one timer wheel on `context.scheduler`, so they run in virtual time in tests.
 *
 * ## Example
 * ```ts
 * import { createEngine, providerBreakers, scriptedModel } from 'runestream';
 * const chain = { providers: [{ name: 'primary', model: scriptedModel([{ text: 'Hi' }]) }], breaker: { openTimeoutMs: 10_000 } };
 * const engine = createEngine({ epics: [providerBreakers(chain)] });
 * // provider/primary, once OPEN, goes HALF_OPEN 10 s later, even across a restart.
 * await engine.close();
 * ```
 *
 * @see chainCall$, which records the outcomes that open the breakers.
 */
export function providerBreakers(chainOrOptions: ProviderBreakersOptions | ProviderChain = {}): Epic {
  const { providers } = chainOrOptions;
  const resolutionMs = ('resolutionMs' in chainOrOptions ? chainOrOptions.resolutionMs : undefined) ?? 1;
  if (!(resolutionMs > 0)) throw new TypeError(`providerBreakers: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  const streams =
    providers === undefined ? undefined : new Set(providers.map((p) => providerBreakerStream(typeof p === 'string' ? p : p.name)));
  /** Whether a breaker stream is one of these providers'. */
  const inScope = (stream: string): boolean => (streams === undefined ? stream.startsWith(providerBreakerStream('')) : streams.has(stream));

  return function providerBreakers(runes$, context) {
    return new Observable<EpicCommand>((subscriber) => {
      const { scheduler } = context;
      /** The open timeout of each armed breaker, for its retry. */
      const timeouts = new Map<string, number>();
      /** Counts each breaker's runes that set or cleared its clock: a slower lookup started before one is stale. */
      const generations = new Map<string, number>();
      const recovering = new Set<string>();

      const clocks = timerWheel<string>(scheduler, resolutionMs, (due) => {
        for (const stream of due) {
          clocks.set(stream, scheduler.now() + retryDelayOf(timeouts.get(stream) ?? 0));
          subscriber.next({ stream, event: { type: 'open_timeout_elapsed' } });
        }
      });
      const generationOf = (stream: string): number => generations.get(stream) ?? 0;
      const arm = (stream: string, openedAt: number, openTimeoutMs: number): void => {
        timeouts.set(stream, openTimeoutMs);
        clocks.set(stream, openedAt + openTimeoutMs);
      };
      const disarm = (stream: string): void => {
        clocks.delete(stream);
        timeouts.delete(stream);
      };
      const fail = (error: unknown): void => subscriber.error(error);
      /** The breaker's open timeout, from its state as it was spawned. */
      const openTimeoutOf = async (stream: string): Promise<number | undefined> =>
        context.state(stream, circuitBreaker)?.openTimeoutMs ?? (await firstValueFrom(context.snapshot(stream, circuitBreaker)))?.state.openTimeoutMs;

      /** Arms a breaker found OPEN without the rune that opened it: its deadline from its history. */
      const recover = (stream: string, lastSeq: number, lastAt: number): void => {
        if (recovering.has(stream)) return;
        recovering.add(stream);
        const generation = generationOf(stream);
        Promise.all([openClockStart(context, stream, lastSeq, lastAt), openTimeoutOf(stream)])
          .then(([openedAt, openTimeoutMs]) => {
            if (generationOf(stream) !== generation || clocks.get(stream) !== undefined || openTimeoutMs === undefined) return;
            arm(stream, openedAt, openTimeoutMs);
          }, fail)
          .finally(() => recovering.delete(stream));
      };

      const onRune = (rune: BreakerRune): void => {
        const { stream } = rune;
        if (rune.to === 'OPEN' && !startsOpenClock(rune)) {
          // A forced call's outcome: the clock runs on, unless this epic never saw it start.
          if (clocks.get(stream) === undefined) recover(stream, rune.seq, rune.at);
          return;
        }
        const generation = generationOf(stream) + 1;
        generations.set(stream, generation);
        if (rune.to !== 'OPEN') {
          disarm(stream);
          return;
        }
        const known = context.state(stream, circuitBreaker)?.openTimeoutMs;
        if (known !== undefined) {
          arm(stream, rune.at, known);
          return;
        }
        openTimeoutOf(stream).then((openTimeoutMs) => {
          if (generationOf(stream) === generation && openTimeoutMs !== undefined) arm(stream, rune.at, openTimeoutMs);
        }, fail);
      };

      const breakers$ = runes$.pipe(
        ofMachine(circuitBreaker),
        filter((rune) => inScope(rune.stream)),
      );
      const subscription = breakers$.subscribe(onRune);
      // Durable clocks: every OPEN breaker in the store, at its original deadline. A breaker heard
      // live meanwhile is left to its live rune.
      subscription.add(
        storedHeads(breakers$, context, { machine: circuitBreaker.id, values: ['OPEN'] }).subscribe((head) => {
          if (!inScope(head.stream) || generations.has(head.stream) || clocks.get(head.stream) !== undefined) return;
          recover(head.stream, head.seq, head.at);
        }),
      );
      return () => {
        subscription.unsubscribe();
        clocks.dispose();
      };
    });
  };
}
