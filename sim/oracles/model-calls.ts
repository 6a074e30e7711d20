import { modelRequestOf } from '../../src/effects/agent/model-call-record.js';
import { callOptionsOf } from '../../src/effects/llm/provider-stream.js';
import { agentStreams, parseStreamId } from '../../src/reducers/stream-ids.js';
import type { RuneOf } from '../../src/reducers/rune.js';
import type { ToolCallState } from '../../src/reducers/tool-call/schema.js';
import type { turnEngine } from '../../src/reducers/turn-engine/machine.js';
import { promptKey } from '../fake-llm.js';
import type { World } from '../world.js';
import type { Finding, Oracle } from './oracle.js';

type TurnRune = RuneOf<typeof turnEngine>;

/** The runes that end a call the model answered: the call reached the API (a failed one may not have: every breaker open). */
const ANSWERED = new Set(['tool_calls_received', 'response_done', 'model_call_spent']);

/**
 * Every model call a turn recorded is recoverable from the log: the request rebuilt from the turn
 * stream's runes and its calls' outcomes (`modelRequestOf`) is, as the AI SDK sends it, a prompt
 * and tools the model API received, by the API's own record.
 */
export async function checkModelCalls(world: World): Promise<Finding | undefined> {
  const model = world.llm.model('p1');
  for (const { stream, machine } of await world.streams()) {
    if (machine !== 'turn-engine') continue;
    const parts = parseStreamId(stream);
    if (parts?.kind !== 'turn') continue;
    const agent = agentStreams(parts.root, parts.agentId);
    const runes = (await world.read(stream)) as TurnRune[];
    const calls = new Map<string, ToolCallState>();
    for (const rune of runes) {
      if (!ANSWERED.has(rune.event.type) || !('request' in rune.event) || rune.event.request === undefined) continue;
      for (const earlier of runes) {
        if (earlier.seq > rune.event.request.upTo) break;
        if (earlier.event.type !== 'tool_calls_received') continue;
        for (const callId of earlier.event.callIds) {
          if (!calls.has(callId)) {
            const call = await world.engine.snapshot<ToolCallState>(agent.call(callId));
            if (call !== undefined) calls.set(callId, call.state);
          }
        }
      }
      const where = `${stream} seq ${rune.seq} (${rune.kind})`;
      const request = modelRequestOf(runes, rune.seq, calls);
      if (request === undefined) return { oracle: 'model calls', message: `${where}: the request it records cannot be rebuilt from the log`, stream };
      const options = await callOptionsOf(model, request, new AbortController().signal).catch((error: unknown) => error as Error);
      if (options instanceof Error)
        return { oracle: 'model calls', message: `${where}: the request rebuilt from the log is no prompt the AI SDK sends (${options.message})`, stream };
      if (!world.llm.prompts.has(promptKey(options)))
        return { oracle: 'model calls', message: `${where}: the request rebuilt from the log is not one the model was sent`, stream };
    }
  }
  return undefined;
}

export const modelCallsOracle = (): Oracle => ({ name: 'model calls', final: checkModelCalls });
