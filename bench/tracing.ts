import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { tracingEpic } from '../src/agents.js';
import { DELTAS, best, engineRound, fmt } from './agent-deltas.js';
import { trace, type Tracer } from '@opentelemetry/api';
import type { Rune } from '../src/index.js';
import { RuneSpans } from '../src/effects/telemetry/rune-spans.js';
import { measure, type Rate } from './harness.js';

/** Each arm runs this many rounds, the arms taking turns; each keeps its best. A round takes seconds. */
const ROUNDS = 3;

/**
 * (Information: the issue sets no bar) What tracing costs on the agent-delta benchmark: one turn
 * of 100,000 scripted-model deltas through the engine to a `state$` subscriber, as in
 * bench/agent-deltas.ts, with
 * 1. no tracing (the anchor);
 * 2. `tracingEpic()` on `@opentelemetry/api`'s global provider with no SDK registered (the no-op
 *    tracer: what an application that installs no SDK pays);
 * 3. `tracingEpic({ tracer })` on an SDK `BasicTracerProvider` with a `SimpleSpanProcessor` into an
 *    `InMemorySpanExporter` (every span recorded and exported; checked: the turn's two spans).
 * The deltas are the hot path: each is one rune the tracing epic looks at (the first one also
 * stamps the chat span's time to first chunk).
 */
export async function benchTracing(): Promise<boolean> {
  const exporter = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('bench');
  const arms = [
    { name: 'no tracing (anchor)', epics: () => [] },
    { name: 'tracingEpic, no-op API (no SDK)', epics: () => [tracingEpic()] },
    { name: 'tracingEpic, SDK + in-memory exporter', epics: () => [tracingEpic({ tracer })] },
  ];
  const results: (Rate | undefined)[] = arms.map(() => undefined);
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts at another arm, so none always runs right after the same one (and its garbage).
    for (let k = 0; k < arms.length; k++) {
      const i = (round + k) % arms.length;
      const arm = arms[i]!;
      exporter.reset();
      (globalThis as { gc?: () => void }).gc?.();
      results[i] = best(results[i], await engineRound(arm.epics(), arm.name));
      if (i === 2) {
        const names = exporter.getFinishedSpans().map((span) => span.name);
        if (names.join() !== 'chat scripted-model,invoke_agent b1')
          throw new Error(`tracing: the in-memory exporter holds ${JSON.stringify(names)}, expected the turn's chat and invoke_agent spans`);
      }
    }
  }
  const anchor = results[0]!;
  console.log(`\nTracing on the agent-delta benchmark: ${fmt(DELTAS)} scripted-model deltas -> runes -> state$, best of ${ROUNDS} rounds per arm`);
  for (const rate of results) {
    const ratio = rate!.rate / anchor.rate;
    console.log(`  ${rate!.name.padEnd(44)} ${fmt(rate!.rate).padStart(14)} deltas/s  (${(rate!.ms / 1000).toFixed(2)} s)  ${ratio.toFixed(3)}x of the anchor`);
  }
  const micro = [
    { name: 'no-op API', tracer: trace.getTracer('bench-noop'), ns: Infinity },
    { name: 'SDK + in-memory exporter', tracer, ns: Infinity },
  ];
  for (let round = 0; round < ROUNDS; round++) for (const arm of micro) arm.ns = Math.min(arm.ns, spansPerDelta(arm.tracer));
  for (const arm of micro) console.log(`  (information) RuneSpans per delta rune (endsUnseenRun + take), ${arm.name}: ${arm.ns.toFixed(1)} ns (best of ${ROUNDS})`);
  console.log('  (information: no bar set)');
  return true;
}

/**
 * The tracing epic's own work per delta rune, apart from the engine: ns per rune of one turn's
 * runes (its start, the deltas, its end) through `RuneSpans` (`endsUnseenRun`, `take`), less a loop that only reads
 * each rune's machine. Steadier than the engine rounds on a loaded machine.
 */
function spansPerDelta(tracer: Tracer): number {
  const stream = 'conv/b1/agent/b1/turn';
  const rune = (seq: number, kind: string, event: Rune['event'], from: string, to: string): Rune => ({ stream, seq, machine: 'turn-engine', kind, event, from, to, at: seq });
  const runes: Rune[] = [
    rune(1, 'turn.started', { type: 'start_turn', input: 'count' }, 'idle', 'streaming'),
    ...Array.from({ length: DELTAS }, (_, i) => rune(i + 2, 'turn.assistant_delta', { type: 'assistant_delta', content: `w${i + 1} ` }, 'streaming', 'streaming')),
    rune(DELTAS + 2, 'turn.completed', { type: 'response_done', model: 'scripted-model', provider: 'scripted' }, 'streaming', 'completed'),
  ];
  let machines = 0;
  const bare = measure('bare loop', runes.length, () => {
    for (const r of runes) if (r.machine === 'turn-engine') machines++;
  });
  const traced = measure('RuneSpans.take', runes.length, () => {
    const spans = new RuneSpans(tracer, { captureContent: false, maxOpenSpans: 10 });
    // What the epic does per rune: is it the end of a run it never saw start, then take it.
    for (const r of runes) if (!spans.endsUnseenRun(r)) spans.take(r);
  });
  if (machines === 0) throw new Error('tracing: the bare loop saw no rune');
  return Math.max(0, 1e9 / traced.rate - 1e9 / bare.rate);
}
