/**
 * One arm of the metrics benchmark, in a process of its own: `observed` has `createMetrics()`
 * observing from start to finish, `plain` never. Prints `{ ops, ms, timed }` as one JSON line.
 */
import { chatActor, createEngine, memoryStore, type ChatActorEvent, type DispatchResult } from '../src/index.js';
import { createMetrics } from '../src/server/index.js';
import { measureAsync } from './harness.js';

const events: readonly ChatActorEvent[] = [
  { type: 'ProcessInteraction', userId: '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21' },
  { type: 'InteractionComplete', success: true },
];
/** Dispatches fired before awaiting the last one; even, so every batch ends in `idle`. */
const BATCH = 1_000;
const WARMUP_ROUNDS = 4;
const ROUNDS = 12;
const ROUND_MS = 150;

const observed = process.argv[2] === 'observed';
const metrics = observed ? createMetrics() : undefined;
// The channels are the process's: observing one engine counts what every engine of the process
// does, so each round's fresh engine is measured with no unsubscribe between rounds.
const host = createEngine({ store: memoryStore() });
metrics?.observe(host);

/** A fresh engine on a memory store with one chat-actor stream, dispatched to for one round. */
async function round(): Promise<{ ops: number; ms: number }> {
  const engine = createEngine({ store: memoryStore() });
  const spawned = await engine.spawn('chat-1', chatActor);
  if (!spawned.accepted) throw new Error(`spawn refused: ${spawned.reason}`);
  const batch = async (): Promise<void> => {
    let last!: Promise<DispatchResult>;
    for (let i = 0; i < BATCH; i++) last = engine.dispatch('chat-1', events[i & 1]);
    const result = await last;
    if (!result.accepted) throw new Error(`dispatch refused: ${result.reason}`);
  };
  (globalThis as { gc?: () => void }).gc?.();
  const rate = await measureAsync('', BATCH, batch, ROUND_MS);
  await engine.close();
  return rate;
}

let ops = 0;
let ms = 0;
for (let i = 0; i < WARMUP_ROUNDS + ROUNDS; i++) {
  const rate = await round();
  if (i < WARMUP_ROUNDS) continue;
  ops += rate.ops;
  ms += rate.ms;
}
// The metrics must have seen the work, or the comparison means nothing.
const text = metrics === undefined ? '' : await metrics.registry.metrics();
const timed = Number(/runestream_dispatch_duration_seconds_count\{machine="chat-actor"\} (\d+)/.exec(text)?.[1] ?? 0);
await host.close();
console.log(JSON.stringify({ ops, ms, timed }));
