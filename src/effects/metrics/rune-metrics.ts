import type { Counter } from 'prom-client';
import type { Rune } from '../../reducers/rune.js';
import type { StreamHead } from '../../streams/store.js';
import { circuitBreaker } from '../../reducers/circuit-breaker/machine.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import { providerBreakerStream } from '../llm/provider-chain.js';
import type { EngineMetricFamilies } from './metric-families.js';

/** The bounded label functions the rune metrics use (see `boundedLabel`). */
export interface RuneLabels {
  readonly tool: (value: string) => string;
  readonly provider: (value: string) => string;
  readonly model: (value: string) => string;
}

const PROVIDER_PREFIX = providerBreakerStream('');
const BREAKER_STATES = ['CLOSED', 'OPEN', 'HALF_OPEN'] as const;
const TOOL_ENDS: ReadonlySet<string> = new Set(toolCall.terminal);
const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0);

/**
 * What the runes say, as metrics: every rune counted by machine and kind, and what the agent
 * machines' runes carry: model calls (a provider breaker's `success` / `failure`), time to first
 * delta and tokens (a turn's runes: `at`, `usage`, `model`), tool calls ended and the wait for
 * their approval (a tool call's runes), each breaker's state. No new hook: the log says it all.
 *
 * Per-stream bookkeeping (a turn waiting for its first delta, a call waiting for approval, a
 * call's tool) lasts only until its stream moves on, and holds at most `maxTracked` streams.
 */
export class RuneMetrics {
  /** Runes by machine, then kind: counted here on the hot path, added to the counter at scrape. */
  readonly #counted = new Map<string, Map<string, { n: number }>>();
  /** Turn streams in `streaming` with no delta yet: when the model call started. */
  readonly #awaitingDelta = new Map<string, number>();
  /** Tool-call streams awaiting approval: since when. */
  readonly #awaitingApproval = new Map<string, number>();
  /** Tool-call streams not ended yet: their tool's name. */
  readonly #tools = new Map<string, string>();
  /** Provider breakers whose state a live rune set: a stored head read later is older and must not overwrite it. */
  readonly #breakersSeen = new Set<string>();

  constructor(
    private readonly families: EngineMetricFamilies,
    private readonly labels: RuneLabels,
    private readonly maxTracked: number,
  ) {}

  /** Takes one live rune. */
  readonly take = (rune: Rune): void => {
    let byKind = this.#counted.get(rune.machine);
    if (byKind === undefined) this.#counted.set(rune.machine, (byKind = new Map()));
    const counted = byKind.get(rune.kind);
    if (counted === undefined) byKind.set(rune.kind, { n: 1 });
    else counted.n++;
    if (rune.machine === turnEngine.id) this.#turn(rune);
    else if (rune.machine === toolCall.id) this.#toolCall(rune);
    else if (rune.machine === circuitBreaker.id && rune.stream.startsWith(PROVIDER_PREFIX)) this.#breaker(rune);
  };

  /** Adds what was counted since the last scrape to the counter (labels capped as they are added). */
  flushRunes(counter: Counter<'machine' | 'kind'>, label: (value: string) => string): void {
    for (const [machine, byKind] of this.#counted) {
      for (const [kind, counted] of byKind) {
        if (counted.n === 0) continue;
        counter.inc({ machine: label(machine), kind: label(kind) }, counted.n);
        counted.n = 0;
      }
    }
  }

  #track(map: Map<string, number | string>, stream: string, value: number | string): void {
    if (map.size < this.maxTracked || map.has(stream)) map.set(stream, value);
  }

  #turn(rune: Rune): void {
    const { stream, event } = rune;
    if (rune.to === 'streaming' && rune.from !== 'streaming') this.#track(this.#awaitingDelta, stream, rune.at);
    else if (event.type === 'assistant_delta') {
      const startedAt = this.#awaitingDelta.get(stream);
      if (startedAt !== undefined) {
        this.families.modelFirstDelta.observe(Math.max(0, rune.at - startedAt) / 1000);
        this.#awaitingDelta.delete(stream);
      }
    } else if (rune.to !== 'streaming') this.#awaitingDelta.delete(stream);
    if (event.type === 'response_done' || event.type === 'tool_calls_received' || event.type === 'model_call_spent') {
      const usage = event.usage as { inputTokens?: unknown; outputTokens?: unknown } | undefined;
      const model = this.labels.model(typeof event.model === 'string' ? event.model : 'unknown');
      const input = count(usage?.inputTokens);
      const output = count(usage?.outputTokens);
      if (input > 0) this.families.modelTokens.inc({ model, direction: 'input' }, input);
      if (output > 0) this.families.modelTokens.inc({ model, direction: 'output' }, output);
    }
  }

  #toolCall(rune: Rune): void {
    const { stream } = rune;
    if (rune.kind === toolCall.spawnKind) {
      const toolName = (rune.event as { input?: { toolName?: unknown } }).input?.toolName;
      // Its label, not the name: what is kept per call stays short whatever the name.
      if (typeof toolName === 'string') this.#track(this.#tools, stream, this.labels.tool(toolName));
    }
    if (rune.to === 'awaiting_approval' && rune.from !== 'awaiting_approval') this.#track(this.#awaitingApproval, stream, rune.at);
    else if (rune.from === 'awaiting_approval' && rune.to !== 'awaiting_approval') {
      const since = this.#awaitingApproval.get(stream);
      if (since !== undefined) this.families.approvalWait.observe(Math.max(0, rune.at - since) / 1000);
      this.#awaitingApproval.delete(stream);
    }
    if (rune.to !== undefined && TOOL_ENDS.has(rune.to)) {
      const status = rune.to === 'denied' ? 'denied' : String(rune.payload?.status ?? rune.to.replace(/_result$/, ''));
      this.families.toolExecutions.inc({ tool: this.labels.tool(this.#tools.get(stream) ?? 'unknown'), status });
      this.#tools.delete(stream);
    }
  }

  /**
   * Each stored provider breaker's state, from its head: what `runestream_breaker_state` shows
   * after a restart until a live rune moves the breaker. A breaker a live rune has set already is
   * left as that rune set it.
   */
  restoreBreakers(heads: Iterable<StreamHead>): void {
    for (const head of heads) {
      if (head.machine !== circuitBreaker.id || !head.stream.startsWith(PROVIDER_PREFIX) || head.value === undefined) continue;
      if (this.#breakersSeen.has(head.stream)) continue;
      this.#setBreakerState(head.stream, head.value);
    }
  }

  #breaker(rune: Rune): void {
    if (rune.to === undefined) return;
    if (this.#breakersSeen.size < this.maxTracked) this.#breakersSeen.add(rune.stream);
    this.#setBreakerState(rune.stream, rune.to);
  }

  #setBreakerState(stream: string, value: string): void {
    const provider = this.labels.provider(stream.slice(PROVIDER_PREFIX.length));
    for (const state of BREAKER_STATES) this.families.breakerState.set({ provider, state }, state === value ? 1 : 0);
  }
}
