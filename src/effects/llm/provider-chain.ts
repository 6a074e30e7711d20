import { Observable, firstValueFrom, from, type ObservableInput, type SchedulerLike, type Subscription } from 'rxjs';
import { circuitBreaker, circuitBreakerAllowsCall } from '../../reducers/circuit-breaker/machine.js';
import type { CircuitBreakerEvent, CircuitBreakerInput, CircuitBreakerState } from '../../reducers/circuit-breaker/schema.js';
import type { EpicCommand } from '../../streams/epic.js';
import type { Snapshot } from '../../streams/store.js';
import { modelCall$ } from './model-call.js';
import type { ChainOutput, ModelRequest, Provider } from './model-types.js';

/** A provider fallback chain (seed 002): providers in order of preference, each behind a circuit breaker. */
export interface ProviderChain {
  /** Tried in this order; names must be unique (each names its breaker stream). */
  readonly providers: readonly Provider[];
  /**
   * The configuration a provider's breaker is spawned with, on its first use. Defaults:
   * `failureThreshold` 3, `successThreshold` 1, `openTimeoutMs` 30,000. A breaker that exists
   * already keeps the configuration it was spawned with.
   */
  readonly breaker?: Partial<CircuitBreakerInput>;
  /** Each provider's call fails if it produces nothing for this long (see `modelCall$`). Default 120,000 ms. */
  readonly callTimeoutMs?: number;
}

/** One provider's failure in a chain call. */
export interface ProviderFailure {
  readonly provider: string;
  readonly error: unknown;
}

/** Every provider of a chain failed (or was skipped): the call has no answer. */
export class AllProvidersFailedError extends Error {
  override readonly name = 'AllProvidersFailedError';
  constructor(
    /** Each provider tried, in order, with its error. */
    readonly failures: readonly ProviderFailure[],
    /** Providers not tried because their breaker was OPEN (while another's was not). */
    readonly skipped: readonly string[] = [],
  ) {
    const tried = failures.map((f) => `"${f.provider}": ${describeError(f.error)}`).join('; ');
    const notTried = skipped.length === 0 ? '' : `; skipped, breaker OPEN: ${skipped.map((s) => `"${s}"`).join(', ')}`;
    super(`all providers failed: ${tried}${notTried}`);
  }
}

/** The breaker configuration a chain spawns with: its `breaker` over the defaults. */
export const breakerInputOf = (chain: Pick<ProviderChain, 'breaker'>): CircuitBreakerInput => ({
  failureThreshold: 3,
  successThreshold: 1,
  openTimeoutMs: 30_000,
  ...chain.breaker,
});

/** The stream id of a provider's circuit breaker: `provider/<name>`. */
export const providerBreakerStream = (providerName: string): string => `provider/${providerName}`;

/** The longest error text recorded on a breaker. */
const MAX_ERROR_LENGTH = 500;

/** An error as one line of text: its message (a status code first, when it has one). */
export function describeError(error: unknown): string {
  let text: string;
  if (error instanceof Error) {
    const status = (error as { statusCode?: unknown }).statusCode;
    text = typeof status === 'number' && !error.message.includes(String(status)) ? `HTTP ${status}: ${error.message}` : error.message;
    if (text.length === 0) text = error.name;
  } else {
    text = typeof error === 'string' ? error : (JSON.stringify(error) ?? String(error));
  }
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH - 1)}…` : text;
}

/** Throws a TypeError naming what is wrong with a chain. */
export function checkChain(chain: ProviderChain, caller: string): void {
  if (!Array.isArray(chain?.providers) || chain.providers.length === 0) {
    throw new TypeError(`${caller}: a chain needs at least one provider in "providers"`);
  }
  const seen = new Set<string>();
  for (const provider of chain.providers) {
    if (typeof provider?.name !== 'string' || provider.name.length === 0) throw new TypeError(`${caller}: every provider needs a non-empty "name"`);
    if (seen.has(provider.name)) throw new TypeError(`${caller}: provider name "${provider.name}" appears twice; each names its own breaker`);
    seen.add(provider.name);
  }
  const { callTimeoutMs = 120_000 } = chain;
  if (!(callTimeoutMs > 0)) throw new TypeError(`${caller}: "callTimeoutMs" must be positive (or Infinity: no timeout), got ${String(callTimeoutMs)}`);
  const parsed = circuitBreaker.schemas.input.safeParse(breakerInputOf(chain));
  if (!parsed.success) {
    throw new TypeError(`${caller}: invalid "breaker": ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
}

/** What the chain knows of a provider's breaker when the call starts. */
interface Link {
  readonly provider: Provider;
  readonly stream: string;
  /** `undefined`: no breaker yet (or it could not be read): spawn one with the first outcome. */
  readonly state: CircuitBreakerState | undefined;
}

/**
 * What {@link chainCall$} needs of its caller: the breakers' states and a clock. An epic passes
 * its context; outside an epic, an engine's `snapshot` (a Promise) does as well.
 */
export interface ChainContext {
  snapshot<S = unknown>(stream: string): ObservableInput<Snapshot<S> | undefined>;
  readonly scheduler: SchedulerLike;
}

/**
 * One model call through a provider fallback chain (seed 002, DESIGN.md "provider fallback
 * chain"), as an Observable of {@link ChainOutput}s: the answering provider's parts, and the
 * commands that record each provider's outcome on its circuit breaker. The caller (an epic)
 * dispatches the commands, in order.
 *
 * 1. Each provider has a `circuit-breaker` stream, {@link providerBreakerStream} (`provider/<name>`),
 *    kept in the engine so an OPEN breaker survives a restart. Their states are read once, with
 *    `context.snapshot`, when the call is subscribed; a provider without one gets a spawn command
 *    (`{stream, spawn: 'circuit-breaker', input}`) before its first outcome. A breaker that cannot
 *    be read lets the call through.
 * 2. Providers are tried in order, skipping those whose breaker is OPEN; if every breaker is OPEN,
 *    all are tried in order anyway (an answer beats none).
 * 3. A provider fails if its call errors, or produces nothing for `callTimeoutMs`, before its first
 *    part: its `failure` is recorded and the next provider is tried.
 * 4. The first provider whose first part arrives answers: its parts are emitted as they stream,
 *    then its `success` is recorded when the call completes. An error after its first part is
 *    recorded as a `failure` and errors the output: no fallback in the middle of an answer.
 * 5. If all fail, the output errors with an {@link AllProvidersFailedError} listing each failure.
 * 6. Unsubscribing aborts the call in progress and records nothing for it.
 *
 * ## Example
 * ```ts
 * import { asyncScheduler, lastValueFrom, tap } from 'rxjs';
 * import { createEngine, isSpawnCommand } from 'runestream';
 * import { chainCall$, scriptedModel } from 'runestream/agents';
 * const engine = createEngine();
 * const chain = {
 *   providers: [
 *     { name: 'primary', model: scriptedModel([{ error: 'HTTP 503' }]) },
 *     { name: 'backup', model: scriptedModel([{ text: 'Hello from backup' }]) },
 *   ],
 * };
 * const request = { messages: [{ role: 'user' as const, content: 'Hi' }], tools: {} };
 * const calling = chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: asyncScheduler }).pipe(
 *   tap((out) => {
 *     if (out.type === 'part') return console.log(out.part.type);
 *     const { command } = out;
 *     console.log(command.stream, isSpawnCommand(command) ? 'spawn' : command.event.type);
 *     // Not awaited: the breakers' runes need not hold up the answer (a refusal is a result, not an error).
 *     if (isSpawnCommand(command)) void engine.spawn(command.stream, command.spawn, command.input);
 *     else void engine.dispatch(command.stream, command.event);
 *   }),
 * );
 * await lastValueFrom(calling);
 * // Logs:
 * // provider/primary spawn
 * // provider/primary failure
 * // text-delta
 * // text-delta
 * // text-delta
 * // finish
 * // provider/backup spawn
 * // provider/backup success
 * await engine.close();
 * ```
 *
 * @see providerBreakers for the epic that half-opens an OPEN breaker after its timeout.
 */
export function chainCall$(chain: ProviderChain, request: ModelRequest, context: ChainContext): Observable<ChainOutput> {
  checkChain(chain, 'chainCall$');
  const input = breakerInputOf(chain);
  const { callTimeoutMs = 120_000 } = chain;

  return new Observable<ChainOutput>((subscriber) => {
    let attempt: Subscription | undefined;
    let stopped = false;
    const failures: ProviderFailure[] = [];

    const record = (link: Link, event: CircuitBreakerEvent): void => {
      if (link.state === undefined) subscriber.next({ type: 'command', command: { stream: link.stream, spawn: circuitBreaker.id, input } });
      subscriber.next({ type: 'command', command: { stream: link.stream, event } satisfies EpicCommand });
    };

    const tryFrom = (links: readonly Link[], index: number, skipped: readonly string[]): void => {
      const link = links[index];
      if (link === undefined) {
        subscriber.error(new AllProvidersFailedError(failures, skipped));
        return;
      }
      let answered = false;
      attempt = modelCall$(link.provider.model, request, { timeoutMs: callTimeoutMs, scheduler: context.scheduler }).subscribe({
        next: (part) => {
          answered = true;
          subscriber.next({ type: 'part', part });
        },
        error: (error: unknown) => {
          record(link, { type: 'failure', error: describeError(error) });
          if (answered) {
            subscriber.error(error);
            return;
          }
          failures.push({ provider: link.provider.name, error });
          tryFrom(links, index + 1, skipped);
        },
        complete: () => {
          record(link, { type: 'success' });
          subscriber.complete();
        },
      });
    };

    Promise.all(
      chain.providers.map(async (provider): Promise<Link> => {
        const stream = providerBreakerStream(provider.name);
        const snapshot = await firstValueFrom(from(context.snapshot<CircuitBreakerState>(stream))).catch(() => undefined);
        return { provider, stream, state: snapshot?.state };
      }),
    )
      .then((links) => {
        if (stopped) return;
        const open = (link: Link): boolean => link.state !== undefined && !circuitBreakerAllowsCall(link.state);
        const closed = links.filter((link) => !open(link));
        if (closed.length === 0) tryFrom(links, 0, []);
        else
          tryFrom(
            closed,
            0,
            links.filter(open).map((link) => link.provider.name),
          );
      })
      .catch((error: unknown) => subscriber.error(error));

    return () => {
      stopped = true;
      attempt?.unsubscribe();
    };
  });
}
