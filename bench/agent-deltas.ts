import { filter, firstValueFrom } from 'rxjs';
import { performance } from 'node:perf_hooks';
import { streamText } from 'ai';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../src/agents.js';
import { agentStreams, createEngine, memoryStore, toolCall, type Engine, type Epic, type EngineError, type ToolCallState, type TurnEngineState } from '../src/index.js';
import { percentile, within, type Rate } from './harness.js';

/** The figure: deltas streamed by one model answer. */
export const DELTAS = 100_000;
/** Candidate and anchor alternate this many times; each keeps its best. A round takes seconds. */
const ROUNDS = 3;
const BAR = 0.5;
/** Approvals measured one at a time for the (information) approval-to-execution figure. */
const APPROVALS = 200;
const APPROVAL_WARMUP = 20;

/** `"w1 "`, `"w2 "`, ...: short, distinct deltas, so a lost, doubled or reordered one shows in the text. */
const deltas: readonly string[] = Array.from({ length: DELTAS }, (_, i) => `w${i + 1} `);
const expected = deltas.join('');

export const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
export const best = (a: Rate | undefined, b: Rate): Rate => (a === undefined || b.rate > a.rate ? b : a);
const rateOf = (name: string, ms: number): Rate => ({ name, rate: (DELTAS / ms) * 1000, ops: DELTAS, ms });

/** Rejects on an epic's failure or a rejected command: a broken engine stalls or fails loudly, never finishes fast. */
function failOnEngineErrors(engine: Engine, what: string): { failed: Promise<never>; stop: () => void } {
  let stop = (): void => {};
  const failed = new Promise<never>((_, reject) => {
    const subscription = engine.errors$.subscribe((error: EngineError) => {
      const detail = 'reason' in error ? error.reason : 'error' in error ? String(error.error) : '';
      reject(new Error(`${what}: engine error ${error.type}: ${detail}`));
    });
    stop = () => subscription.unsubscribe();
  });
  failed.catch(() => {}); // raced below; never an unhandled rejection when nobody awaits it
  return { failed, stop };
}

/** A round that takes longer than this has stalled (an engine that lost the turn's end): it fails rather than hangs. */
const STALL_MS = 60_000;

/** Resolves with the first state of `stream` that `done` accepts. */
function stateWhere<S>(engine: Engine, stream: string, done: (state: S) => boolean): Promise<S> {
  return new Promise<S>((resolve, reject) => {
    const subscription = engine.state$<S>(stream).subscribe({
      next: (state) => {
        if (!done(state)) return;
        resolve(state);
        queueMicrotask(() => subscription.unsubscribe());
      },
      error: reject,
    });
  });
}

/**
 * The candidate: a fresh engine with `agentEpics` (and `extra` epics beside them: the tracing
 * bench's) on a scripted model answering the deltas, agent `conv/b1/agent/b1`. Timed from the
 * `start_turn` dispatch until a `state$` subscriber of its turn has seen the turn completed (or
 * already back to idle) with the whole output.
 */
export async function engineRound(extra: readonly Epic[] = [], name = 'runestream turn: model -> runes -> state$'): Promise<Rate> {
  const store = memoryStore();
  const model = scriptedModel([{ text: deltas }]);
  const engine = createEngine({ store, epics: [...agentEpics({ model }), ...extra] });
  const { failed, stop } = failOnEngineErrors(engine, 'engine');
  const b1 = agentStreams('conv/b1', 'b1');
  const turn = b1.turn;
  // The agent's companion streams (conversation, lifecycle) are created from the spawn rune: wait
  // for them, so what is timed is the turn. (Heard from every rune: the conversation does not exist yet.)
  const ready = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === b1.lifecycle && rune.to === 'idle')));
  const spawned = await engine.spawn(turn, 'turn-engine', { agentId: 'b1' });
  if (!spawned.accepted) throw new Error(`spawn refused: ${spawned.reason}`);
  await within(Promise.race([ready, failed]), STALL_MS, 'engine: conv/b1/agent/b1 ready');

  let seen = 0;
  let last: TurnEngineState | undefined;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const subscription = engine.state$<TurnEngineState>(turn).subscribe((state) => {
    seen++;
    last = state;
    if (state.turn === 1 && (state.value === 'completed' || state.value === 'idle')) finish();
  });

  const start = performance.now();
  const started = await engine.dispatch(turn, { type: 'start_turn', input: 'Count to a hundred thousand.' });
  if (!started.accepted) throw new Error(`start_turn refused: ${started.reason}`);
  await within(Promise.race([finished, failed]), STALL_MS, 'engine: the turn completed');
  const ms = performance.now() - start;
  subscription.unsubscribe();

  // A broken engine must not look fast: every delta in the output, in order; every one a rune in
  // the store; every state published to the subscriber (the initial one, the start, each delta, the end).
  const runes = await store.read(turn);
  stop();
  await engine.close();
  if (model.doStreamCalls.length !== 1) throw new Error(`engine: the model was called ${model.doStreamCalls.length} times, expected once`);
  if (last?.value !== 'completed' && last?.value !== 'idle') throw new Error(`engine: the turn ended ${String(last?.value)}`);
  if (last.output !== expected) throw new Error(`engine: the turn's output has ${last.output.length} chars, expected ${expected.length} (the deltas concatenated)`);
  const stored = runes.filter((rune) => rune.kind === 'turn.assistant_delta').length;
  if (stored !== DELTAS) throw new Error(`engine: the store holds ${stored} turn.assistant_delta runes, expected ${DELTAS}`);
  const storedText = runes.reduce((text, rune) => (rune.kind === 'turn.assistant_delta' ? text + (rune.event.content as string) : text), '');
  if (storedText !== expected) throw new Error('engine: the stored deltas do not concatenate to the text');
  if (seen < DELTAS + 3) throw new Error(`engine: the state$ subscriber saw ${seen} states, expected at least ${DELTAS + 3}`);
  return rateOf(name, ms);
}

/**
 * (Information) the floor: the same scripted model's provider stream (`doStream`) read directly,
 * its text deltas concatenated: what reading the model costs before any engine or SDK work.
 */
async function providerStreamRound(): Promise<Rate> {
  const model = scriptedModel([{ text: deltas }]);
  const start = performance.now();
  const { stream } = await model.doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'Count to a hundred thousand.' }] }] });
  const reader = stream.getReader();
  let text = '';
  let count = 0;
  let finished = false;
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    const part = read.value;
    if (part.type === 'text-delta') {
      text += part.delta;
      count++;
    } else if (part.type === 'finish') finished = true;
  }
  const ms = performance.now() - start;
  if (!finished || count !== DELTAS || text !== expected) {
    throw new Error(`doStream: ${count} deltas, ${text.length} chars, finish ${finished}; expected ${DELTAS} deltas, ${expected.length} chars`);
  }
  return rateOf('the model read directly (doStream)', ms);
}

/** The anchor: the same scripted model consumed directly with the AI SDK's `streamText` (`fullStream`). */
async function streamTextRound(): Promise<Rate> {
  const model = scriptedModel([{ text: deltas }]);
  const start = performance.now();
  const result = streamText({ model, prompt: 'Count to a hundred thousand.', maxRetries: 0 });
  let text = '';
  let count = 0;
  let finished = false;
  for await (const part of result.fullStream) {
    if (part.type === 'text-delta') {
      text += part.text;
      count++;
    } else if (part.type === 'error') {
      throw part.error;
    } else if (part.type === 'finish') {
      finished = true;
    }
  }
  const ms = performance.now() - start;
  if (!finished || count !== DELTAS || text !== expected) {
    throw new Error(`streamText: ${count} deltas, ${text.length} chars, finish ${finished}; expected ${DELTAS} deltas, ${expected.length} chars`);
  }
  return rateOf('AI SDK streamText -> fullStream', ms);
}

const TERMINAL: ReadonlySet<string> = new Set(toolCall.terminal);

/**
 * (Information) the time from a tool call's `approved` dispatch to its tool's `execute` being
 * called. Calls are driven directly, one at a time: spawn `conv/b2/agent/b2/call/<id>` (a `tool-call` stream of
 * agent `b2`, as the turns epic would), wait for `awaiting_approval`, then `performance.now()`
 * and `dispatch(approved)`; the tool records `performance.now()` when it is called.
 */
async function approvalLatencies(): Promise<number[]> {
  const startedAt = new Map<string, number>();
  const approve = defineTool({
    name: 'approve_me',
    description: 'Returns its input; needs approval.',
    inputSchema: z.object({ n: z.number() }),
    needsApproval: true,
    execute: ({ n }) => {
      startedAt.set(`c${n}`, performance.now());
      return n;
    },
  });
  const store = memoryStore();
  const engine = createEngine({ store, epics: agentEpics({ model: scriptedModel([]), tools: [approve] }) });
  const { failed, stop } = failOnEngineErrors(engine, 'approval');
  /** What a stalled call's log holds, for the error. */
  const logOf = async (stream: string): Promise<string> =>
    (await store.read(stream)).map((rune) => `${rune.seq} ${rune.kind} ${rune.from ?? ''}->${rune.to ?? ''}`).join(', ');
  const latencies: number[] = [];
  for (let n = 1; n <= APPROVAL_WARMUP + APPROVALS; n++) {
    const callId = `c${n}`;
    const stream = agentStreams('conv/b2', 'b2').call(callId);
    const spawned = await engine.spawn(stream, 'tool-call', { callId, toolName: approve.name, arguments: { n } });
    if (!spawned.accepted) throw new Error(`spawn of ${stream} refused: ${spawned.reason}`);
    await within(Promise.race([stateWhere<ToolCallState>(engine, stream, (s) => s.value === 'awaiting_approval'), failed]), STALL_MS, `approval: ${stream} awaiting_approval`);
    // Any outcome ends the wait (a call that timed out or failed must fail the bench, not stall it).
    const completed = stateWhere<ToolCallState>(engine, stream, (s) => TERMINAL.has(s.value));
    const t0 = performance.now();
    const approved = engine.dispatch(stream, { type: 'approved', approver: 'bench' });
    const result = await approved;
    if (!result.accepted) throw new Error(`approved refused: ${result.reason}`);
    const outcome = await within(Promise.race([completed, failed]), STALL_MS, `approval: ${stream} completed_result`).catch(async (error: unknown) => {
      throw new Error(`${String(error)} (its tool ${startedAt.has(callId) ? 'ran' : 'never ran'}; its runes: ${await logOf(stream)})`);
    });
    const t1 = startedAt.get(callId);
    if (t1 === undefined || outcome.value !== 'completed_result' || outcome.output !== n) {
      throw new Error(
        `approval: call ${callId} ended ${outcome.value} with ${JSON.stringify(outcome.output)}, its tool ${t1 === undefined ? 'never ran' : 'ran'}; its runes: ${await logOf(stream)}`,
      );
    }
    if (n > APPROVAL_WARMUP) latencies.push(t1 - t0);
  }
  stop();
  await engine.close();
  if (startedAt.size !== APPROVAL_WARMUP + APPROVALS) throw new Error(`approval: ${startedAt.size} executions, expected ${APPROVAL_WARMUP + APPROVALS}`);
  return latencies.sort((a, b) => a - b);
}

/** Microseconds per delta at a rate. */
const usPerDelta = (rate: Rate): string => `${(1e6 / rate.rate).toFixed(1)} µs/delta`;

/**
 * The bar: 100,000 deltas from the scripted model through a turn into runes and out to a
 * `state$` subscriber, at least 0.5x the rate of an application consuming the same model's stream
 * with the AI SDK's `streamText` alone, measured alternately in this one process run (each keeps
 * its best round). The turn reads the model's provider stream itself (`modelCall$` over
 * `doStream`), not through `streamText`: the ratio sets the engine's whole turn (model call,
 * runes, store, `state$`) against the SDK's stream with nothing after it. Also prints, for
 * information, the floor (the provider stream read directly; the turn's cost per delta less the
 * floor's is what the engine adds) and the latency from a tool's `approved` to its execution start.
 */
export async function benchAgentDeltas(): Promise<boolean> {
  let engine: Rate | undefined;
  let sdk: Rate | undefined;
  let floor: Rate | undefined;
  for (let i = 0; i < ROUNDS; i++) {
    engine = best(engine, await engineRound());
    sdk = best(sdk, await streamTextRound());
    floor = best(floor, await providerStreamRound());
  }
  const ratio = engine!.rate / sdk!.rate;
  const ok = ratio >= BAR;
  console.log(`\nAgent turn: ${fmt(DELTAS)} scripted-model deltas -> turn.assistant_delta runes -> state$ subscriber`);
  console.log('  (against consuming the same model with the AI SDK streamText; the turn reads the provider stream itself)');
  for (const rate of [engine!, sdk!, floor!]) {
    console.log(`  ${rate.name.padEnd(44)} ${fmt(rate.rate).padStart(14)} deltas/s  (${(rate.ms / 1000).toFixed(2)} s, ${usPerDelta(rate)})`);
  }
  console.log(`  ratio ${ratio.toFixed(2)}x (bar: >= ${BAR}x)  ${ok ? 'PASS' : 'FAIL'}`);
  console.log(`  (information) the engine adds ${(1e6 / engine!.rate - 1e6 / floor!.rate).toFixed(1)} µs per delta to reading the model`);

  const latencies = await approvalLatencies();
  console.log(
    `  (information) tool approved -> execute called, ${APPROVALS} calls one at a time (tool-call streams conv/b2/agent/b2/call/<id> spawned directly): ` +
      `p50 ${percentile(latencies, 50).toFixed(3)} ms, p99 ${percentile(latencies, 99).toFixed(3)} ms`,
  );
  return ok;
}
