import { EMPTY, Observable, catchError, defer, forkJoin, from, lastValueFrom, merge, mergeMap, of, switchMap, toArray } from 'rxjs';
import { circuitBreaker } from '../../reducers/circuit-breaker/machine.js';
import type { CircuitBreakerState } from '../../reducers/circuit-breaker/schema.js';
import type { RuneOf } from '../../reducers/rune.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import { firedByTimer } from '../../streams/fired-by-timer.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';
import type { EffectsByKey, StreamView } from '../../streams/state-effects.js';
import type { Provider } from './model-types.js';
import { breakerInputOf, providerBreakerStream, settingsDiffer, type ProviderChain } from './provider-chain.js';

/** Options of {@link providerBreakers}, with their defaults. A {@link ProviderChain} is one too. */
export interface ProviderBreakersOptions {
  /**
   * Whose breakers to time: provider names, or providers (so a chain can be passed as it is).
   * A provider (with its `model`) also says its breaker's settings: at start, a stored breaker
   * holding others gets a `settings_changed` rune. Default: every `circuit-breaker` stream whose
   * id starts with `provider/`.
   */
  readonly providers?: readonly (string | Pick<Provider, 'name'> | Pick<Provider, 'name' | 'model' | 'breaker'>)[];
  /** How late an open timeout may fire: the timer wheel's bucket size. Default 1 ms (breakers are few). */
  readonly resolutionMs?: number;
}

/** A dispatched `open_timeout_elapsed` that left no rune (the store failed) is sent again this much later (its open time, 1 s to a minute). */
const retryDelayOf = (openForMs: number): number => Math.min(60_000, Math.max(1000, openForMs));

type BreakerRune = RuneOf<typeof circuitBreaker>;

/** Whether a breaker rune starts its OPEN clock: it entered OPEN. */
const startsOpenClock = (rune: BreakerRune): boolean => rune.to === 'OPEN' && rune.from !== 'OPEN';

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
 * 1. A live rune that takes a provider's breaker to OPEN arms its clock: the rune's `at` plus the
 *    breaker's `openTimeoutMs` (from its state: the settings it holds, `settings_changed` re-times
 *    the clock), or plus the `retryAfterMs` of the failure that opened it (an HTTP 429's
 *    `Retry-After`; kept in the state as `openForMs`). When it is due, the epic dispatches
 *    `open_timeout_elapsed`. A rune that leaves OPEN disarms it; the outcome of a call forced
 *    through an OPEN breaker does not move it. An operator's `manual_keep_open` disarms it until
 *    `manual_reset`: a kept-open breaker has no clock, after a restart too.
 * 2. The deadline lives in the log: the clock is an effect of the OPEN state (see `stateEffects`),
 *    so after a restart the engine re-arms every stored OPEN breaker at its original deadline,
 *    from the rune that opened it, or fires it at once if that has passed.
 * 3. A timeout whose dispatch left no rune is sent again a little later (its timeout, between 1 s
 *    and a minute); the breaker's rune ends the clock.
 *
 * Every clock is a `durableDeadline` on `context.scheduler`, so they run in virtual time in tests.
 *
 * ## Example
 * ```ts
 * import { createEngine } from 'runestream';
 * import { providerBreakers, scriptedModel } from 'runestream/agents';
 * const chain = { providers: [{ name: 'primary', model: scriptedModel([{ text: 'Hi' }]), breaker: { openTimeoutMs: 10_000 } }] };
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
  const streams = providers === undefined ? undefined : new Set(providers.map((p) => providerBreakerStream(typeof p === 'string' ? p : p.name)));
  /** Whether a breaker stream is one of these providers'. */
  const inScope = (stream: string): boolean => (streams === undefined ? stream.startsWith(providerBreakerStream('')) : streams.has(stream));

  const configured = (providers ?? []).filter((p): p is Pick<Provider, 'name' | 'model' | 'breaker'> => typeof p !== 'string' && 'model' in p);
  const clocks = stateEffects({
    name: 'providerBreakers',
    machine: circuitBreaker,
    states: ['OPEN'],
    // An operator's manual_keep_open stops the OPEN clock (see halfOpen$), edited settings re-time
    // it from when it opened; a forced call's outcome does not move it.
    restartOn: (rune) => rune.event.type === 'manual_keep_open' || rune.event.type === 'settings_changed',
    effects: (view, context): EffectsByKey<typeof circuitBreaker> => (inScope(view.stream) ? { halfOpen: halfOpen$(view, context, resolutionMs) } : {}),
  });
  const epic: Epic = (runes$, context, deps) => merge(clocks(runes$, context, deps), settingsAtStart$(configured, context));
  Object.defineProperty(epic, 'name', { value: 'providerBreakers' });
  return epic;
}

/**
 * At start, a `settings_changed` for each configured provider whose stored breaker holds other
 * settings (they were edited): the edit is in the log, and an OPEN breaker's clock uses the new
 * `openTimeoutMs`, before any call. A breaker not stored yet is spawned with them by its first call.
 */
function settingsAtStart$(providers: readonly Pick<Provider, 'name' | 'breaker'>[], context: EpicContext): Observable<EpicCommand> {
  return from(providers).pipe(
    mergeMap((provider) => {
      const stream = providerBreakerStream(provider.name);
      if (context.ownership !== undefined && !context.ownership.owns(stream)) return EMPTY;
      const settings = breakerInputOf(provider);
      return context.snapshot<CircuitBreakerState>(stream).pipe(
        mergeMap((stored) =>
          stored !== undefined && settingsDiffer(stored.state, settings) ? of({ stream, event: { type: 'settings_changed' as const, settings } }) : EMPTY,
        ),
        // A breaker that cannot be read now: its next call records the settings.
        catchError(() => EMPTY),
      );
    }),
  );
}

/**
 * The OPEN clock of a breaker: `open_timeout_elapsed` at the `at` of the rune that started it plus
 * the breaker's own `openTimeoutMs`. That rune is the live one when it entered OPEN; a breaker
 * found OPEN (stored, first heard through a forced call's outcome, or with edited settings) has it
 * looked up in its history. None while an operator keeps it OPEN.
 */
function halfOpen$(view: StreamView<typeof circuitBreaker>, context: EpicContext, resolutionMs: number): Observable<EpicCommand> {
  const { stream, rune } = view;
  const openedAt$ = rune !== undefined && startsOpenClock(rune) ? of(rune.at) : defer(() => openClockStart(context, stream, view.seq, view.at));
  return forkJoin([openedAt$, view.state$]).pipe(
    switchMap(([openedAt, state]) =>
      // A breaker an operator keeps OPEN has no clock: it stays OPEN until manual_reset.
      state === undefined || state.keptOpen === true
        ? EMPTY
        : durableDeadline(
            openedAt + (state.openForMs ?? state.openTimeoutMs),
            { type: 'open_timeout_elapsed' as const },
            { scheduler: context.scheduler, resolutionMs, retryMs: retryDelayOf(state.openForMs ?? state.openTimeoutMs) },
          ).pipe(firedByTimer(stream)),
    ),
  );
}
