import type { Rune } from '../../src/reducers/rune.js';
import type { FakeLlm } from '../fake-llm.js';
import type { Oracle } from './oracle.js';

const quoted = (text: string): string => JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);

/**
 * A turn's text is the model's, from the model API's own record of what each call sent: the
 * `assistant_delta` runes of one response (from the rune that enters `streaming` to the one that
 * leaves it) joined are the whole text of a call that finished, when the response ends with
 * `tool_calls_received` or `response_done` (coalesced deltas lose nothing, add nothing, keep the
 * order); and a prefix of what a call sent when it ends otherwise (an error, an interrupt, a crash
 * found by the next process): a crash inside a flush window loses at most the text held, never
 * text acknowledged (the log oracle checks the acknowledged runes are in the file).
 */
export const turnTextOracle = (llm: FakeLlm): Oracle => {
  /** The text of each turn stream's response under way, as its runes say. */
  const responses = new Map<string, string>();
  return {
    name: 'turn text',
    see(rune: Rune) {
      if (rune.machine !== 'turn-engine') return undefined;
      const event = rune.event as { type: string; content?: string };
      if (rune.to === 'streaming' && rune.from !== 'streaming') responses.set(rune.stream, '');
      const text = responses.get(rune.stream);
      if (text === undefined) return undefined;
      if (event.type === 'assistant_delta') {
        responses.set(rune.stream, text + (event.content ?? ''));
        return undefined;
      }
      if (rune.to === 'streaming') return undefined;
      responses.delete(rune.stream);
      if (event.type === 'tool_calls_received' || event.type === 'response_done') {
        if (llm.sent.some((sent) => sent.finished && sent.text === text)) return undefined;
        return {
          oracle: 'turn text',
          message: `${rune.stream} seq ${rune.seq} (${rune.kind}): its response's text ${quoted(text)} is no answer the model sent whole`,
          stream: rune.stream,
        };
      }
      // Nothing appended is a prefix of anything, even when no call sent a word (every provider failed).
      if (text === '' || llm.sent.some((sent) => sent.text.startsWith(text))) return undefined;
      return {
        oracle: 'turn text',
        message: `${rune.stream} seq ${rune.seq} (${rune.kind}): its response's text ${quoted(text)} is no prefix of any answer the model sent`,
        stream: rune.stream,
      };
    },
  };
};
