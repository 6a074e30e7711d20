import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart, LanguageModelV4StreamResult } from '@ai-sdk/provider';
import type { SimClock } from './clock.js';
import type { Random } from './random.js';

/**
 * The model API the simulation talks to: outside the system under test, so it keeps its own
 * books. Every prompt the simulation writes carries its conversation's tag (`[root:conv/c1]`), and
 * the API counts, per conversation, the calls it answered: the budget oracle trusts this count, not
 * the log's.
 */

/** A conversation's tag in every text the simulation sends: how the API knows whose call it answers. */
export const rootTag = (root: string): string => `[root:${root}]`;
const TAG = /\[root:([^\]\s]+)\]/;

/** What the model API saw of one conversation. */
export interface CallBook {
  /** Calls that reached the API. */
  started: number;
  /** Calls answered in full (their `finish` part sent). */
  answered: number;
  /** Calls started and not yet answered, failed or aborted. */
  inFlight: number;
  /** Of the answered, those of a ReAct loop (offered its internal tools). */
  answeredReact: number;
}

/** The text one call sent (its text deltas joined, as far as it got), and whether it finished. */
export interface SentText {
  text: string;
  finished: boolean;
}

/** Told each answered call, after the book counted it: the book's key (the conversation, or `plan:<conversation>`) and the book. */
export type AnsweredListener = (root: string, book: CallBook) => void;

export interface FakeLlmOptions {
  readonly random: Random;
  readonly clock: SimClock;
  /** Chance that a provider fails a call outright (an HTTP 503 before any output). */
  readonly failureRate?: number;
}

type Part = LanguageModelV4StreamPart;
/** A part and how long the API takes before sending it, in virtual ms. */
interface Timed {
  readonly part: Part;
  readonly delayMs: number;
}

const abortError = (signal: AbortSignal): unknown => signal.reason ?? new DOMException('The model call was aborted', 'AbortError');

/** The text of a call's prompt, every message and part: where the tag and the request's kind are read from. */
const promptText = (call: LanguageModelV4CallOptions): string => JSON.stringify(call.prompt);
/** A call's prompt and tools as one text: how the API tells what it was sent. */
export const promptKey = (call: Pick<LanguageModelV4CallOptions, 'prompt' | 'tools'>): string => JSON.stringify([call.prompt, call.tools ?? []]);

/** How many tool results the prompt already holds: a model that has used tools twice answers in text. */
const toolRounds = (call: LanguageModelV4CallOptions): number => call.prompt.filter((message) => message.role === 'tool').length;

/** The call's system prompt, or `''`. */
const systemOf = (call: LanguageModelV4CallOptions): string => {
  const system = call.prompt.find((message) => message.role === 'system');
  return system === undefined ? '' : String(system.content);
};

/** Whether a call is an autonomy plan's planner or critic (their system prompts say so). */
const isPlanCall = (call: LanguageModelV4CallOptions): boolean => /^You (plan work|review the results)/.test(systemOf(call));

/** A model API for the simulation: its answers drawn from the seed, its timing on virtual time. */
export class FakeLlm {
  readonly books = new Map<string, CallBook>();
  readonly #listeners = new Set<AnsweredListener>();
  readonly #random: Random;
  readonly #clock: SimClock;
  readonly #failureRate: number;
  #calls = 0;
  /** Bumped by every part sent: the clock's settle waits while it moves. */
  parts = 0;
  /** What each call that reached the API sent of its text, in call order: what a turn's text may be. */
  readonly sent: SentText[] = [];
  /** What each call that reached the API was sent, as JSON of its prompt and tools: what a call recorded in the log must rebuild to. */
  readonly prompts = new Set<string>();

  constructor(options: FakeLlmOptions) {
    this.#random = options.random;
    this.#clock = options.clock;
    this.#failureRate = options.failureRate ?? 0.05;
  }

  /** The simulation's clock now (virtual time). */
  now(): number {
    return this.#clock.scheduler.now();
  }

  onAnswered(listener: AnsweredListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  bookOf(root: string): CallBook {
    let book = this.books.get(root);
    if (book === undefined) this.books.set(root, (book = { started: 0, answered: 0, inFlight: 0, answeredReact: 0 }));
    return book;
  }

  /** A provider of this API under `name` (`provider/<name>` is its breaker). */
  model(name: string): LanguageModelV4 {
    const doStream = async (call: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> => {
      const signal = call.abortSignal;
      if (signal?.aborted === true) throw abortError(signal);
      const callNumber = ++this.#calls;
      this.prompts.add(promptKey(call));
      const text = promptText(call);
      const root = TAG.exec(text)?.[1] ?? 'untagged';
      if (this.#random.chance(this.#failureRate)) {
        const error = Object.assign(new Error(`${name}: service unavailable`), { statusCode: 503 });
        throw error;
      }
      const parts = this.#answer(call, text, root, callNumber);
      const sent: SentText = { text: '', finished: false };
      this.sent.push(sent);
      // A planner's or critic's call is the plan's, not an agent's: it counts in no conversation's
      // budget. Its book's key (`plan:<root>`) is what listeners are told, so none takes it for the conversation's.
      const key = isPlanCall(call) ? `plan:${root}` : root;
      const book = this.bookOf(key);
      book.started++;
      book.inFlight++;
      const react = (call.tools ?? []).some((tool) => tool.name === 'load_older_messages');
      let ended = false;
      const end = (answered: boolean): void => {
        if (ended) return;
        ended = true;
        book.inFlight--;
        if (answered) {
          book.answered++;
          if (react) book.answeredReact++;
          for (const listener of this.#listeners) listener(key, book);
        }
      };
      let index = 0;
      let onAbort: (() => void) | undefined;
      const stream = new ReadableStream<Part>({
        start: (controller) => {
          if (signal === undefined) return;
          onAbort = () => {
            end(false);
            controller.error(abortError(signal));
          };
          signal.addEventListener('abort', onAbort, { once: true });
        },
        pull: async (controller) => {
          const next = parts[index++];
          if (next === undefined) return; // a hanging answer: nothing more, until aborted
          if (next.delayMs > 0) await new Promise<void>((resolve) => this.#clock.scheduler.schedule(() => resolve(), next.delayMs));
          if (ended) return;
          this.parts++;
          controller.enqueue(next.part);
          if (next.part.type === 'text-delta') sent.text += next.part.delta;
          if (next.part.type === 'finish') {
            sent.finished = true;
            end(true);
            controller.close();
          } else if (next.part.type === 'error') {
            end(false);
            controller.close();
          }
        },
        cancel: () => {
          end(false);
          if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
        },
      });
      return { stream };
    };
    return {
      specificationVersion: 'v4',
      provider: 'sim',
      modelId: name,
      supportedUrls: {},
      doStream,
      doGenerate: () => Promise.reject(new Error('the simulation streams every call')),
    };
  }

  /** The parts of one answer, each with its delay: what the seed makes of this request. */
  #answer(call: LanguageModelV4CallOptions, text: string, root: string, callNumber: number): Timed[] {
    const random = this.#random;
    const slow = random.chance(0.2);
    const delay = (): number => (slow ? random.int(1_000, 20_000) : random.chance(0.5) ? 0 : random.int(1, 500));
    const timed = (part: Part): Timed => ({ part, delayMs: delay() });
    const out: Timed[] = [{ part: { type: 'stream-start', warnings: [] }, delayMs: delay() }];
    const textParts = (content: string, pieces: number): void => {
      const id = `t${callNumber}`;
      out.push(timed({ type: 'text-start', id }));
      const size = Math.max(1, Math.ceil(content.length / pieces));
      for (let at = 0; at < content.length; at += size) out.push(timed({ type: 'text-delta', id, delta: content.slice(at, at + size) }));
      out.push(timed({ type: 'text-end', id }));
    };
    const finish = (reason: 'stop' | 'tool-calls', outputTokens: number): void => {
      out.push(
        timed({
          type: 'finish',
          usage: {
            inputTokens: { total: Math.ceil(text.length / 4), noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
            outputTokens: { total: outputTokens, text: undefined, reasoning: undefined },
          },
          finishReason: { unified: reason, raw: reason },
        }),
      );
    };
    const systemText = systemOf(call);
    if (systemText.startsWith('You plan work')) {
      textParts(this.#plan(text, root), random.int(1, 4));
      finish('stop', 40);
      return out;
    }
    if (systemText.startsWith('You review the results')) {
      textParts(this.#verdict(text), random.int(1, 3));
      finish('stop', 20);
      return out;
    }
    const kind = random.weighted({
      text: toolRounds(call) >= 2 ? 8 : 4,
      tools: toolRounds(call) >= 2 ? 0 : 4,
      empty: 0.3,
      failMidway: 0.4,
      hang: 0.2,
    });
    const tools = (call.tools ?? []).filter((tool) => tool.type === 'function').map((tool) => tool.name);
    if (kind === 'tools' && tools.length > 0) {
      if (random.chance(0.3)) textParts(`Let me check. ${rootTag(root)}`, random.int(1, 3));
      const count = random.int(1, 3);
      for (let i = 0; i < count; i++) {
        const id = `call_${callNumber}_${i}`;
        const toolName = random.chance(0.05) ? 'no_such_tool' : random.pick(tools);
        const input = JSON.stringify(this.#toolInput(toolName, root));
        out.push(timed({ type: 'tool-input-start', id, toolName }));
        // The arguments arrive split, as a provider streams them.
        const cut = random.int(0, input.length);
        for (const delta of [input.slice(0, cut), input.slice(cut)]) if (delta.length > 0) out.push(timed({ type: 'tool-input-delta', id, delta }));
        out.push(timed({ type: 'tool-input-end', id }));
        out.push(timed({ type: 'tool-call', toolCallId: id, toolName, input }));
      }
      finish('tool-calls', 10 * count);
      return out;
    }
    if (kind === 'empty') {
      finish('stop', 0);
      return out;
    }
    if (kind === 'failMidway') {
      textParts('I was about to', 2);
      out.pop(); // no text-end: the stream breaks
      out.push(timed({ type: 'error', error: Object.assign(new Error('connection reset by the provider'), { statusCode: 502 }) }));
      return out;
    }
    if (kind === 'hang') return out; // sends its start, then nothing: the call's idle timeout ends it
    textParts(`Answer ${callNumber} for ${rootTag(root)}.`, random.int(1, 6));
    finish('stop', 12);
    return out;
  }

  /** A tool's input as the fake tools take it; a delegate's task carries the tag on. */
  #toolInput(toolName: string, root: string): unknown {
    const random = this.#random;
    if (toolName === 'delegate') return { role: random.pick(['helper', 'lead', 'nobody']), task: `Look into it ${rootTag(root)}` };
    if (random.chance(0.05)) return { wrong: true }; // arguments the tool refuses
    return { text: `n${random.hex(12)}`, steps: random.int(0, 3) };
  }

  /** A planner's answer: usually a valid plan, sometimes one the loop must refuse. */
  #plan(prompt: string, root: string): string {
    const random = this.#random;
    const roles = /Roles \(ownerRole must be one of them\):\\n((?:- [^\\]+\\n?)+)/.exec(prompt)?.[1];
    const names = roles === undefined ? ['writer'] : [...roles.matchAll(/- ([a-z]+)/g)].map((match) => match[1]!);
    const shape = random.weighted({ valid: 8, notJson: 1, cycle: 1 });
    if (shape === 'notJson') return 'Here is my plan: first we think.';
    const count = random.int(1, 3);
    const tasks = Array.from({ length: count }, (_, i) => ({
      id: `t${i + 1}`,
      description: `Step ${i + 1} ${rootTag(root)}`,
      dependsOn: shape === 'cycle' ? [`t${((i + 1) % count) + 1}`] : i > 0 && random.chance(0.5) ? [`t${i}`] : [],
      priority: random.int(0, 2),
      ownerRole: random.pick(names),
    }));
    return JSON.stringify({ tasks });
  }

  /** A critic's verdict over the tasks the prompt lists: pass, retry some, or replan. */
  #verdict(prompt: string): string {
    const random = this.#random;
    const ids = [...prompt.matchAll(/- ([a-z0-9_.-]+) \[/g)].map((match) => match[1]!);
    const verdict = random.weighted({ pass: 5, retry: 3, replan: 1 });
    if (verdict === 'retry' && ids.length > 0) return JSON.stringify({ verdict: 'retry', findings: 'not good enough', tasks: [random.pick(ids)] });
    if (verdict === 'replan') return JSON.stringify({ verdict: 'replan', findings: 'the plan misses a step' });
    return JSON.stringify({ verdict: 'pass', summary: 'done' });
  }
}
