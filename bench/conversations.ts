import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { streamText, type ModelMessage } from 'ai';
import { agentEpics, scriptedModel, type ScriptStep } from '../src/agents.js';
import { agentStreams, checkInvariants, createEngine, type Rune } from '../src/index.js';
import { sqliteStore } from '../src/sqlite.js';
import { percentile } from './harness.js';
import { pacedModel } from './paced-model.js';

/** The figures: this many conversations at once, each a root agent and one sub-agent. */
const CONVERSATIONS = 1000;
/** Each model answer streams this many deltas, each held back this long: 20 x 5 ms = 100 ms a call at least. */
const DELTAS = 20;
const DELTA_MS = 5;
/** The helper's system prompt: how the scripted model tells a sub-agent's call from its root's. */
const HELPER_SYSTEM = 'You are a helper.';

const words = (label: string): string[] => Array.from({ length: DELTAS }, (_, i) => `${label}${i} `);
const numberOf = (text: string): string => /#(\d+)/.exec(text)?.[1] ?? '?';
const textOf = (call: LanguageModelV4CallOptions): string =>
  call.prompt.map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content))).join('\n');

/**
 * What the one scripted model answers, from the prompt alone (1,000 conversations share it): a
 * helper answers its task; a root agent delegates its question, then answers with the result.
 */
const isHelper = (call: LanguageModelV4CallOptions): boolean => call.prompt.some((message) => message.role === 'system' && message.content === HELPER_SYSTEM);
/** Whose call it is: `h<n>` for conversation n's helper, `r<n>` for its root. */
const callKey = (call: LanguageModelV4CallOptions): string => `${isHelper(call) ? 'h' : 'r'}${numberOf(textOf(call))}`;

function answer(call: LanguageModelV4CallOptions): ScriptStep {
  const n = numberOf(textOf(call));
  if (isHelper(call)) return { text: words(`h${n}-`) };
  if (call.prompt.some((message) => message.role === 'tool')) return { text: words(`r${n}-`) };
  return { toolCalls: [{ toolName: 'delegate', input: { role: 'helper', task: `Look into question #${n}.` } }] };
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** One turn's wall time as the engine's runes show it, and how much of it was the model's own. */
interface TurnTiming {
  startedAt: number;
  endedAt?: number;
}

/**
 * The candidate: `agentEpics` on a SQLite file, roles `{helper}`; every conversation's root turn
 * is started at once. A turn's added latency is its time from `turn.started` to its end, less the
 * time of its own model calls (and, for a root turn, less its sub-agent's whole turn, which is
 * measured as a turn of its own).
 */
async function engineRun(dir: string): Promise<{ ms: number; turns: number; added: number[]; modelMs: number[] }> {
  const model = pacedModel(scriptedModel([answer], { whenExhausted: 'cycle', keepCalls: 0 }), DELTA_MS, callKey);
  const store = sqliteStore(join(dir, 'conversations.db'));
  const engine = createEngine({ store, epics: agentEpics({ model, agents: { helper: { description: 'answers a question', system: HELPER_SYSTEM } } }) });
  const errors: unknown[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  const turns = new Map<string, TurnTiming>();
  let rootsDone = 0;
  let allDone!: () => void;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  engine.runes$().subscribe((rune: Rune) => {
    if (rune.machine !== 'turn-engine') return;
    if (rune.kind === 'turn.started') turns.set(rune.stream, { startedAt: performance.now() });
    else if (rune.to === 'completed' || rune.to === 'error' || rune.to === 'interrupted') {
      turns.get(rune.stream)!.endedAt = performance.now();
      if (rune.stream.endsWith('/agent/root/turn') && ++rootsDone === CONVERSATIONS) allDone();
    }
  });

  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONVERSATIONS }, async (_, i) => {
      const root = agentStreams(`conv/b${i}`, 'root');
      await engine.spawn(root.turn, 'turn-engine');
      const result = await engine.dispatch(root.turn, { type: 'start_turn', input: `Answer question #${i}.` });
      if (!result.accepted) throw new Error(`start_turn refused: ${result.reason}`);
    }),
  );
  await done;
  const ms = performance.now() - started;
  await engine.close();
  if (errors.length > 0) throw new Error(`engine errors: ${JSON.stringify(errors.slice(0, 3))}`);

  // Every conversation ran both turns to completion, with the helper's answer in the root's, and a clean log.
  const check = sqliteStore(join(dir, 'conversations.db'));
  const sample = await check.read(agentStreams('conv/b7', 'root').turn);
  const output = sample.filter((r) => r.kind === 'turn.assistant_delta').map((r) => r.event.content as string);
  if (output.join('') !== words('r7-').join('')) throw new Error(`conversation 7's root answered ${JSON.stringify(output.join(''))}`);
  const streams = ['conv/b7'];
  for await (const head of check.heads({ prefix: 'conv/b7/' })) streams.push(head.stream);
  const runes = (await Promise.all(streams.map((stream) => check.read(stream)))).flat();
  const violations = checkInvariants(runes);
  await check.close();
  if (violations.length > 0) throw new Error(`conversation 7 breaks invariants: ${JSON.stringify(violations.slice(0, 2))}`);

  // Model time per turn, from the paced model's record of each call.
  const modelMsOf = new Map<string, number>();
  for (const call of model.calls) modelMsOf.set(call.key, (modelMsOf.get(call.key) ?? 0) + call.ms);
  const added: number[] = [];
  for (const [stream, timing] of turns) {
    if (timing.endedAt === undefined) throw new Error(`turn ${stream} never ended`);
    const n = numberOf(stream.replace('conv/b', '#'));
    const isRoot = stream.endsWith('/agent/root/turn');
    const own = modelMsOf.get(`${isRoot ? 'r' : 'h'}${n}`) ?? 0;
    const sub = isRoot ? [...turns].find(([other]) => other.startsWith(`conv/b${n}/agent/`) && other !== stream)?.[1] : undefined;
    const subMs = sub?.endedAt === undefined ? 0 : sub.endedAt - sub.startedAt;
    added.push(timing.endedAt - timing.startedAt - own - subMs);
  }
  if (turns.size !== 2 * CONVERSATIONS) throw new Error(`${turns.size} turns ran, expected ${2 * CONVERSATIONS}`);
  return { ms, turns: turns.size, added: added.sort((a, b) => a - b), modelMs: model.calls.map((call) => call.ms) };
}

/**
 * The anchor: the same three model calls per conversation (root, helper, root), made directly with
 * the AI SDK's `streamText` on the same paced model, every conversation at once.
 */
async function directRun(): Promise<{ ms: number; turns: number }> {
  const model = pacedModel(scriptedModel([answer], { whenExhausted: 'cycle', keepCalls: 0 }), DELTA_MS);
  const drain = async (options: { system?: string; prompt: string } | { messages: ModelMessage[] }): Promise<void> => {
    for await (const part of streamText({ ...options, model, maxRetries: 0 } as Parameters<typeof streamText>[0]).fullStream) if (part.type === 'error') throw part.error;
  };
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONVERSATIONS }, async (_, i) => {
      await drain({ prompt: `Answer question #${i}.` });
      await drain({ system: HELPER_SYSTEM, prompt: `Look into question #${i}.` });
      await drain({
        messages: [
          { role: 'user', content: `Answer question #${i}.` },
          { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'delegate', input: {} }] },
          { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'delegate', output: { type: 'text', value: 'done' } }] },
        ],
      });
    }),
  );
  return { ms: performance.now() - started, turns: 2 * CONVERSATIONS };
}

/**
 * (Information; the issue sets no bar.) 1,000 conversations at once, each a root agent that
 * delegates to one sub-agent and answers with its result, on a scripted model that streams 20
 * deltas 5 ms apart, through the engine on a SQLite file: turns per second against the same model
 * calls made directly, and the engine's added latency per turn (its time less its model calls').
 */
export async function benchConversations(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-conversations-'));
  try {
    const engine = await engineRun(dir);
    const direct = await directRun();
    const engineRate = (engine.turns / engine.ms) * 1000;
    const directRate = (direct.turns / direct.ms) * 1000;
    const modelMs = engine.modelMs.sort((a, b) => a - b);
    console.log(`\nConversations: ${fmt(CONVERSATIONS)} at once, each a root agent delegating to a sub-agent (${DELTAS} deltas x ${DELTA_MS} ms a model call), SQLite`);
    console.log(`  ${'runestream: agentEpics + delegate on SQLite'.padEnd(44)} ${engineRate.toFixed(0).padStart(14)} turns/s  (${(engine.ms / 1000).toFixed(2)} s)`);
    console.log(`  ${'the same model calls with streamText'.padEnd(44)} ${directRate.toFixed(0).padStart(14)} turns/s  (${(direct.ms / 1000).toFixed(2)} s)`);
    console.log(`  ratio ${(engineRate / directRate).toFixed(2)}x (information)`);
    console.log(
      `  added latency per turn over its model calls: p50 ${percentile(engine.added, 50).toFixed(1)} ms, p99 ${percentile(engine.added, 99).toFixed(1)} ms` +
        ` (a model call itself: p50 ${percentile(modelMs, 50).toFixed(1)} ms, p99 ${percentile(modelMs, 99).toFixed(1)} ms)`,
    );
    return true;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
