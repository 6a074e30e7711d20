import { createHash } from 'node:crypto';
import type { ModelMessage } from 'ai';
import { canonicalJson } from '../../reducers/canonical-json.js';
import type { RuneOf } from '../../reducers/rune.js';
import type { ToolCallState } from '../../reducers/tool-call/schema.js';
import type { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { ModelCallRequest, RecordedInput } from '../../reducers/turn-engine/schema.js';
import type { ModelRequest, ToolSpec } from '../llm/model-types.js';
import { transcriptOf } from './transcript.js';

type TurnRune = RuneOf<typeof turnEngine>;

/** A value's digest: the SHA-256 of its canonical JSON (keys sorted), in hex. */
export const digestOf = (value: unknown): string => createHash('sha256').update(canonicalJson(value)).digest('hex');

/** The inputs a turn stream recorded with their values so far, by digest. */
function recordedValues(runes: readonly TurnRune[], upTo = Infinity): Map<string, unknown> {
  const values = new Map<string, unknown>();
  for (const rune of runes) {
    if (rune.seq > upTo) break;
    const request = 'request' in rune.event ? rune.event.request : undefined;
    if (request === undefined) continue;
    for (const input of [request.system, request.tools]) if (input?.value !== undefined) values.set(input.digest, input.value);
  }
  return values;
}

/**
 * What the rune that ends a model call records of what the call was sent (`request` of its event):
 * the turn stream's seq its messages were built from (`upTo`: the transcript of the turn's runes
 * up to it, with its tool calls' outcomes), and the digests of its system prompt and tool
 * definitions, each with its value only the first time the stream records that digest. So a
 * call's whole request is recoverable from the log (see {@link modelRequestOf}) while a
 * conversation's log grows with each distinct prompt once, not with every call.
 *
 * @param history The turn stream's runes the request was built from, in seq order.
 */
export function modelCallRecord(request: ModelRequest, history: readonly TurnRune[]): ModelCallRequest {
  const recorded = recordedValues(history);
  const input = (value: unknown): RecordedInput => {
    const digest = digestOf(value);
    return recorded.has(digest) ? { digest } : { digest, value: value as RecordedInput['value'] };
  };
  return {
    upTo: history.at(-1)?.seq ?? 0,
    ...(request.system === undefined ? {} : { system: input(request.system) }),
    tools: input(request.tools),
  };
}

/**
 * The request a model call was sent, rebuilt from its turn stream's log: the call whose outcome is
 * the rune at `seq` (its `tool_calls_received`, `response_done`, `stream_error` or
 * `model_call_spent`). `undefined` when that rune records no call (one written before calls were
 * recorded, or not a call's outcome) or its recorded values are no longer in `runes` (pruned).
 *
 * @param runes The turn stream's runes up to `seq` at least, in seq order.
 * @param calls The states of its tool calls by callId, as `transcriptOf` takes them.
 */
export function modelRequestOf(runes: readonly TurnRune[], seq: number, calls: ReadonlyMap<string, ToolCallState>): ModelRequest | undefined {
  const rune = runes.find((r) => r.seq === seq);
  const call = rune !== undefined && 'request' in rune.event ? rune.event.request : undefined;
  if (call === undefined) return undefined;
  const values = recordedValues(runes, seq);
  const system = call.system === undefined ? undefined : values.get(call.system.digest);
  const tools = values.get(call.tools.digest);
  if ((call.system !== undefined && typeof system !== 'string') || tools === undefined) return undefined;
  const messages: ModelMessage[] = transcriptOf(
    runes.filter((r) => r.seq <= call.upTo),
    calls,
  );
  return { ...(system === undefined ? {} : { system: system as string }), messages, tools: tools as Record<string, ToolSpec> };
}
