import { randomUUID } from 'node:crypto';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import type { LanguageModel } from 'ai';
import { scriptedModel, type ScriptStep } from './scripted-model.js';

/** The offline demo agent's system prompt: it names the built-in tools (`builtinTools`) the demo model calls. */
export const DEMO_SYSTEM =
  'You are the runestream demo agent. You can tell the time (clock), add numbers (add), and save notes (save_note, which a person must approve). Be brief.';

/** The text of the last message of a prompt, and whether it was a tool's result. */
function lastMessage(call: LanguageModelV4CallOptions): { role: string; text: string } {
  const message = call.prompt.at(-1);
  if (message === undefined) return { role: 'user', text: '' };
  if (message.role === 'system') return { role: 'system', text: message.content };
  const text = message.content
    .map((part) => (part.type === 'text' ? part.text : part.type === 'tool-result' ? JSON.stringify((part.output as { value?: unknown }).value ?? part.output) : ''))
    .join('');
  return { role: message.role, text };
}

/**
 * The offline demo model: it answers from the last message, deterministically, by calling the
 * built-in tools (`builtinTools`) (see {@link DEMO_SYSTEM}). "time" asks the
 * clock; "3 + 4" asks add; "note ..." asks save_note (which waits for approval); a tool's result is
 * reported back; anything else gets a short help text.
 */
export function demoScriptedModel(): LanguageModel {
  const answer = (call: LanguageModelV4CallOptions): ScriptStep => {
    const { role, text } = lastMessage(call);
    const id = (): string => `call_${randomUUID()}`;
    if (role === 'tool') return { text: `Done: ${text}` };
    const sum = /(-?\d+(?:\.\d+)?)\s*\+\s*(-?\d+(?:\.\d+)?)/.exec(text);
    if (sum) return { text: 'Let me add those.', toolCalls: [{ toolName: 'add', input: { a: Number(sum[1]), b: Number(sum[2]) }, toolCallId: id() }] };
    if (/\btime\b/i.test(text)) return { text: 'Let me look at the clock.', toolCalls: [{ toolName: 'clock', input: {}, toolCallId: id() }] };
    const note = /\bnote\b:?\s*(.*)$/is.exec(text);
    if (note) return { text: 'I will save that note once you approve it.', toolCalls: [{ toolName: 'save_note', input: { text: note[1] || text }, toolCallId: id() }] };
    return { text: `You said "${text}". Ask me the time, to add two numbers (3 + 4), or to save a note (note: buy milk); the note needs your approval.` };
  };
  return scriptedModel([(call) => answer(call)], { whenExhausted: 'cycle', modelId: 'demo-scripted', keepCalls: 0 }); // answers for as long as it is served: no call kept
}
