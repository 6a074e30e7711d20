import { Observable, Subscription, firstValueFrom, from, type ObservableInput, type SchedulerLike } from 'rxjs';
import { circuitBreaker, circuitBreakerAllowsCall } from '../../reducers/circuit-breaker/machine.js';
import type { CircuitBreakerEvent, CircuitBreakerInput, CircuitBreakerState } from '../../reducers/circuit-breaker/schema.js';
import type { EpicCommand } from '../../streams/epic.js';
import type { Snapshot } from '../../streams/store.js';
import { modelCall$ } from './model-call.js';
import { reportModelCall } from './model-call-channel.js';
import type { ChainOutput, ModelPart, ModelRequest, Provider, SpentCall } from './model-types.js';
import { EmptyAnswerError, ProviderFailedError } from './provider-errors.js';
import { addFallenOver, fallenOverUsage, type FallenOverUsage } from './fallen-over-usage.js';

/** A provider fallback chain (seed 002): providers in order of preference, each behind a circuit breaker. */
export interface ProviderChain {
  /** Tried in this order; names must be unique (each names its breaker stream). */
  readonly providers: readonly Provider[];
  /** Each provider's call fails if it produces nothing for this long (see `modelCall$`). Default 120,000 ms. */
  readonly callTimeoutMs?: number;
}

/** One provider's failure in a chain call. */
export interface ProviderFailure {
  readonly provider: string;
  /** What went wrong, naming the provider and keeping the server's error body. */
  readonly error: ProviderFailedError;
}

/** Every provider of a chain failed (or was skipped): the call has no answer. */
export class AllProvidersFailedError extends Error {
  override readonly name = 'AllProvidersFailedError';
  constructor(
    /** Each provider tried, in order, with its error. */
    readonly failures: readonly ProviderFailure[],
    /** Providers not tried because their breaker let no call through (OPEN, or HALF_OPEN with its trials under way) while another's did. */
    readonly skipped: readonly string[] = [],
    /** What the calls answered on the way used (empty answers, emitted as `spent` outputs as they came), if any: a record. */
    readonly spent?: Readonly<Record<string, number>>,
  ) {
    const tried = failures.map((f) => `"${f.provider}": ${f.error.detail}`).join('; ');
    const notTried = skipped.length === 0 ? '' : `; skipped, breaker OPEN: ${skipped.map((s) => `"${s}"`).join(', ')}`;
    super(`all providers failed: ${tried}${notTried}`);
  }
}

/**
 * The chain's caller refused another provider after an empty answer (its `fallOverRefusal`): the
 * call ends with why, as a budget's refusal of a model call does. The empty answers are emitted
 * already (`spent`) and recorded here too.
 */
export class FallOverRefusedError extends Error {
  override readonly name = 'FallOverRefusedError';
  constructor(
    /** Why no other provider may be called. */
    readonly reason: string,
    /** Each provider tried, in order, with its error. */
    readonly failures: readonly ProviderFailure[],
    /** What the empty answers used: a record. */
    readonly spent?: Readonly<Record<string, number>>,
  ) {
    super(`no other provider may be called: ${reason}`);
  }
}

/** A provider's breaker settings: its `breaker` over the defaults. */
export const breakerInputOf = (provider: Pick<Provider, 'breaker'>): CircuitBreakerInput => ({
  failureThreshold: 3,
  successThreshold: 1,
  openTimeoutMs: 30_000,
  ...provider.breaker,
});

/** Whether a breaker holds other settings than `input` (an absent `halfOpenMaxCalls` is 1). */
export const settingsDiffer = (state: CircuitBreakerState, input: CircuitBreakerInput): boolean =>
  state.failureThreshold !== input.failureThreshold ||
  state.successThreshold !== input.successThreshold ||
  state.openTimeoutMs !== input.openTimeoutMs ||
  (state.halfOpenMaxCalls ?? 1) !== (input.halfOpenMaxCalls ?? 1);

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
    const parsed = circuitBreaker.schemas.input.safeParse(breakerInputOf(provider));
    if (!parsed.success) {
      throw new TypeError(`${caller}: provider "${provider.name}": invalid "breaker": ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
  }
  // One breaker per provider, with one setting: two chains sharing a provider must not disagree.
  if ('breaker' in chain) {
    throw new TypeError(
      `${caller}: a chain has no "breaker": each provider's breaker has its own settings; set "breaker" on the provider ({ name: "${chain.providers[0]!.name}", model, breaker })`,
    );
  }
  const { callTimeoutMs = 120_000 } = chain;
  if (!(callTimeoutMs > 0)) throw new TypeError(`${caller}: "callTimeoutMs" must be positive (or Infinity: no timeout), got ${String(callTimeoutMs)}`);
}

/** What the chain knows of a provider's breaker when the call starts. */
interface Link {
  readonly provider: Provider;
  readonly stream: string;
  /** The provider's configured breaker settings. */
  readonly input: CircuitBreakerInput;
  /**
   * The breaker as stored, with the configured settings (which its first outcome records, if they
   * differ). `undefined`: no breaker yet (or it could not be read): spawn one with the first outcome.
   */
  readonly state: CircuitBreakerState | undefined;
  /** Whether the stored breaker holds other settings than the configured ones (they were edited). */
  readonly settingsChanged: boolean;
}

/**
 * What {@link chainCall$} needs of its caller: the breakers' states and a clock. An epic passes
 * its context; outside an epic, an engine's `snapshot` (a Promise) does as well.
 */
export interface ChainContext {
  snapshot<S = unknown>(stream: string): ObservableInput<Snapshot<S> | undefined>;
  readonly scheduler: SchedulerLike;
  /**
   * A breaker's durable state now, if in memory (an epic's context has it): whether a success
   * changes it, when the call ends. Optional: without it, the state read when the call started.
   */
  state?<S = unknown>(stream: string): S | undefined;
  /**
   * Why no other provider may be called after an empty answer (a billed call: the next one is
   * another call of a budget), or `undefined` if one may. Asked, with that answer, before each
   * fall-over from an empty answer; a reason ends the call with a {@link FallOverRefusedError}.
   * Optional: without it the chain falls over whenever a provider is left.
   */
  fallOverRefusal?(spent: SpentCall): ObservableInput<string | undefined>;
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
 *    (`{stream, spawn: 'circuit-breaker', input}`) before its first outcome, with the provider's
 *    `breaker` settings; a stored one holding other settings is called by the configured ones, and
 *    a `settings_changed` event records them before its first outcome. A breaker that cannot be
 *    read lets the call through.
 * 2. Providers are tried in order, skipping those whose breaker lets no call through: OPEN, or
 *    HALF_OPEN with its `halfOpenMaxCalls` trial calls (default 1) under way, through any chain
 *    of this process that uses the provider.
 *    If no breaker lets a call through, all are tried in order anyway (an answer beats none).
 * 3. A provider fails if its call errors, produces nothing for `callTimeoutMs`, or finishes with
 *    no text and no tool call ({@link EmptyAnswerError}), before its answer starts: its `failure`
 *    is recorded and the next provider is tried. An empty answer was still a call answered (and
 *    billed): it is emitted at once, as a `spent` output with its usage ({@link SpentCall}),
 *    so a budget counts it while the next provider answers. An HTTP 429 or 503 with `Retry-After`
 *    records the failure with `retryAfterMs`, which opens the breaker at once for that long.
 * 4. The first provider whose answer starts (a text delta or a tool call) answers: its parts are
 *    emitted as they stream, then its `success` is recorded when the call completes, if it changes
 *    the breaker: not on a stored breaker `CLOSED` with no failure counted (as `context.state`
 *    shows it then, else as read at the start), so answered calls do not all write to one stream.
 *    An error after that is recorded as a `failure` and errors the output: no fallback in the
 *    middle of an answer. Its `ProviderFailedError` records the empty answers' usage as `spent`
 *    (emitted already). Every provider's outcome is also published on the
 *    `runestream:model:call` diagnostics channel (`MODEL_CALL_CHANNEL`), which the metrics count.
 * 5. Every error names its provider and keeps the server's error body ({@link ProviderFailedError});
 *    if all fail, the output errors with an {@link AllProvidersFailedError} listing each.
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
 *     if (out.type === 'spent') return console.log('an empty answer, billed:', out.usage); // none here
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
  const { callTimeoutMs = 120_000 } = chain;

  return new Observable<ChainOutput>((subscriber) => {
    let attempt: Subscription | undefined;
    let stopped = false;
    const failures: ProviderFailure[] = [];
    // Empty answers fallen over from: answered (and billed) calls, emitted as they come, recorded on a failure.
    let fallen: FallenOverUsage = { calls: 0, usage: {} };

    const record = (link: Link, event: CircuitBreakerEvent): void => {
      if (link.state === undefined) subscriber.next({ type: 'command', command: { stream: link.stream, spawn: circuitBreaker.id, input: link.input } });
      else if (link.settingsChanged) {
        subscriber.next({ type: 'command', command: { stream: link.stream, event: { type: 'settings_changed', settings: link.input } } });
      }
      subscriber.next({ type: 'command', command: { stream: link.stream, event } satisfies EpicCommand });
    };
    // A success that changes nothing (a stored breaker CLOSED with no failure counted, its settings
    // recorded) is not recorded: a rune per answered call on one stream every session writes to.
    const recordSuccess = (link: Link): void => {
      reportModelCall({ provider: link.provider.name, outcome: 'success' });
      const now = context.state?.<CircuitBreakerState>(link.stream) ?? link.state;
      if (now?.value === 'CLOSED' && now.failureCount === 0 && link.state !== undefined && !link.settingsChanged) return;
      record(link, { type: 'success' });
    };
    const recordFailure = (link: Link, error: unknown, spent?: Readonly<Record<string, number>>): ProviderFailedError => {
      reportModelCall({ provider: link.provider.name, outcome: 'failure' });
      const failed = new ProviderFailedError(link.provider.name, error, context.scheduler.now(), spent);
      const { retryAfterMs } = failed;
      record(link, { type: 'failure', error: describeError(failed.detail), ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });
      return failed;
    };

    // After an empty answer, the next provider is another billed call: the caller may refuse it.
    const fallOver = (spent: SpentCall, next: () => void, providerLeft: boolean): void => {
      if (context.fallOverRefusal === undefined || !providerLeft) return next();
      let asked = false;
      // Set before subscribing: an answer given at once starts the next call, which takes its place.
      const asking = new Subscription();
      attempt = asking;
      asking.add(
        from(context.fallOverRefusal(spent)).subscribe({
          next: (reason) => {
            if (asked) return;
            asked = true;
            if (reason === undefined) next();
            else subscriber.error(new FallOverRefusedError(reason, failures, fallenOverUsage(fallen)));
          },
          error: (error: unknown) => subscriber.error(error),
          complete: () => {
            if (!asked) next();
          },
        }),
      );
    };
    const tryFrom = (links: readonly Link[], index: number, skipped: readonly string[], forced: boolean): void => {
      const link = links[index];
      if (link === undefined) {
        subscriber.error(new AllProvidersFailedError(failures, skipped, fallenOverUsage(fallen)));
        return;
      }
      // A HALF_OPEN breaker's trial slots are taken when the call starts (others may have taken them meanwhile).
      const trial = !forced && link.state?.value === 'HALF_OPEN';
      if (trial && !circuitBreakerAllowsCall(link.state!, trials.get(link.provider.name) ?? 0)) {
        tryFrom(links, index + 1, [...skipped, link.provider.name], forced);
        return;
      }
      if (trial) trials.set(link.provider.name, (trials.get(link.provider.name) ?? 0) + 1);
      let trialOver = !trial;
      const endTrial = (): void => {
        if (trialOver) return;
        trialOver = true;
        const left = (trials.get(link.provider.name) ?? 1) - 1;
        if (left > 0) trials.set(link.provider.name, left);
        else trials.delete(link.provider.name);
      };
      // Parts before the answer starts (a finish with nothing before it) are held: an empty answer falls over.
      const held: ModelPart[] = [];
      let answered = false;
      const current = new Subscription(endTrial);
      attempt = current;
      current.add(
        modelCall$(link.provider.model, request, { timeoutMs: callTimeoutMs, scheduler: context.scheduler }).subscribe({
          next: (part) => {
            if (!answered && !startsAnswer(part)) {
              held.push(part);
              return;
            }
            answered = true;
            for (const early of held.splice(0)) subscriber.next({ type: 'part', part: early });
            subscriber.next({ type: 'part', part });
          },
          error: (error: unknown) => {
            endTrial();
            if (answered) {
              // The answer broke off: the call fails, the empty answers before it still spent.
              subscriber.error(recordFailure(link, error, fallenOverUsage(fallen)));
              return;
            }
            const failed = recordFailure(link, error);
            failures.push({ provider: link.provider.name, error: failed });
            tryFrom(links, index + 1, skipped, forced);
          },
          complete: () => {
            endTrial();
            if (!answered) {
              const finish = held.find((part) => part.type === 'finish');
              fallen = addFallenOver(fallen, finish);
              const spent = spentCall(finish);
              subscriber.next(spent);
              failures.push({ provider: link.provider.name, error: recordFailure(link, new EmptyAnswerError(finish?.finishReason)) });
              fallOver(spent, () => tryFrom(links, index + 1, skipped, forced), index + 1 < links.length);
              return;
            }
            recordSuccess(link);
            subscriber.complete();
          },
        }),
      );
    };

    Promise.all(
      chain.providers.map(async (provider): Promise<Link> => {
        const stream = providerBreakerStream(provider.name);
        const input = breakerInputOf(provider);
        const stored = (await firstValueFrom(from(context.snapshot<CircuitBreakerState>(stream))).catch(() => undefined))?.state;
        // The configured settings decide this call already; `record` stores them with its first outcome.
        return {
          provider,
          stream,
          input,
          state: stored === undefined ? undefined : { ...stored, halfOpenMaxCalls: undefined, ...input },
          settingsChanged: stored !== undefined && settingsDiffer(stored, input),
        };
      }),
    )
      .then((links) => {
        if (stopped) return;
        const lets = (link: Link): boolean => link.state === undefined || circuitBreakerAllowsCall(link.state, trials.get(link.provider.name) ?? 0);
        const open = links.filter((link) => !lets(link));
        if (open.length === links.length) tryFrom(links, 0, [], true);
        else
          tryFrom(
            links.filter(lets),
            0,
            open.map((link) => link.provider.name),
            false,
          );
      })
      .catch((error: unknown) => subscriber.error(error));

    return () => {
      stopped = true;
      attempt?.unsubscribe();
    };
  });
}

/** An empty answer as a {@link SpentCall}: its finish part's numeric usage and model. */
const spentCall = (finish: Extract<ModelPart, { type: 'finish' }> | undefined): SpentCall => ({
  type: 'spent',
  usage: Object.fromEntries(Object.entries(finish?.usage ?? {}).filter((entry): entry is [string, number] => typeof entry[1] === 'number')),
  ...(finish?.model === undefined ? {} : { model: finish.model }),
});

/** Whether a part starts an answer: text, or a tool call. A finish alone is no answer. */
const startsAnswer = (part: ModelPart): boolean => (part.type === 'text-delta' && part.text.length > 0) || part.type === 'tool-call';

/**
 * The HALF_OPEN trial calls under way, by provider name: a process's own, not the log's. One count
 * per provider, as its breaker is one: every chain using the provider shares its `halfOpenMaxCalls`.
 */
const trials = new Map<string, number>();
