import { randomUUID } from 'node:crypto';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import type { LanguageModel } from 'ai';
import { z } from 'zod';
import { scriptedModel, type ScriptStep } from '../effects/llm/scripted-model.js';
import { defineTool, type AnyTool } from '../effects/tools/tool.js';

/** Where `runestream serve` finds an OpenAI-compatible model: `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `RUNESTREAM_MODEL`. */
export interface DemoModelConfig {
  readonly baseURL: string;
  readonly apiKey: string | undefined;
  readonly modelId: string;
}

export const DEMO_SYSTEM =
  'You are the runestream demo agent. You can tell the time (clock), add numbers (add), and save notes (save_note, which a person must approve). Be brief.';

/** The demo's tools: harmless, and one of them needs a person's approval. */
export function demoTools(): AnyTool[] {
  const notes: string[] = [];
  return [
    defineTool({
      name: 'clock',
      description: 'The current date and time (ISO 8601, UTC).',
      inputSchema: z.object({}),
      execute: () => new Date().toISOString(),
    }),
    defineTool({
      name: 'add',
      description: 'Adds two numbers.',
      inputSchema: z.object({ a: z.number(), b: z.number() }),
      execute: ({ a, b }) => a + b,
    }),
    defineTool({
      name: 'save_note',
      description: 'Saves a note for the user. A person must approve it first.',
      inputSchema: z.object({ text: z.string().min(1).max(1000) }),
      needsApproval: true,
      execute: ({ text }) => {
        notes.push(text);
        return { saved: text, notes: notes.length };
      },
    }),
  ];
}

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
 * The offline demo model: it answers from the last message, deterministically. "time" asks the
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
  return scriptedModel([(call) => answer(call)], { whenExhausted: 'cycle', modelId: 'demo-scripted' });
}

/** The demo's model: the OpenAI-compatible one configured, or the offline scripted one. */
export function demoModel(config: DemoModelConfig | undefined): { model: LanguageModel; description: string } {
  if (config === undefined) return { model: demoScriptedModel(), description: 'the offline scripted demo model' };
  const provider = createOpenAICompatible({
    name: 'openai-compatible',
    baseURL: config.baseURL,
    ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
    includeUsage: true,
  });
  return { model: provider(config.modelId), description: `${config.modelId} at ${config.baseURL}` };
}
