import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { tracingEpic } from '../src/agents.js';
import { DELTAS, best, engineRound, fmt } from './agent-deltas.js';
import type { Rate } from './harness.js';

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
    for (const [i, arm] of arms.entries()) {
      exporter.reset();
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
  console.log('  (information: no bar set)');
  return true;
}
