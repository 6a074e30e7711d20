import { benchAgentDeltas } from './agent-deltas.js';
import { benchArchival } from './archival.js';
import { benchAutonomy } from './autonomy.js';
import { benchCliLines } from './cli-lines.js';
import { benchChatActorTransition } from './chat-actor-transition.js';
import { benchConversations } from './conversations.js';
import { benchEngineDispatch } from './engine-dispatch.js';
import { benchHydration } from './hydration.js';
import { benchIdleSessions } from './idle-sessions.js';
import { benchImportCost } from './import-cost.js';
import { benchInspectorLatency } from './inspector-latency.js';
import { benchMetrics } from './metrics.js';
import { benchPostgresAppend } from './postgres-append.js';
import { benchPostgresLatency } from './postgres-latency.js';
import { benchPostgresSessions } from './postgres-sessions.js';
import { benchSimulate } from './simulate.js';
import { benchSqliteAppend } from './sqlite-append.js';
import { benchStreamingSessions } from './streaming-sessions.js';
import { benchTracing } from './tracing.js';
import { benchWsFanout } from './ws-fanout.js';

/** Every benchmark by name, in the order `npm run bench` runs them. */
const benchmarks: Record<string, () => boolean | Promise<boolean>> = {
  'chat-actor-transition': benchChatActorTransition,
  'engine-dispatch': benchEngineDispatch,
  'sqlite-append': benchSqliteAppend,
  'postgres-append': benchPostgresAppend,
  'postgres-latency': benchPostgresLatency,
  'postgres-sessions': benchPostgresSessions,
  'idle-sessions': benchIdleSessions,
  hydration: benchHydration,
  'ws-fanout': benchWsFanout,
  'agent-deltas': benchAgentDeltas,
  'streaming-sessions': benchStreamingSessions,
  'cli-lines': benchCliLines,
  conversations: benchConversations,
  autonomy: benchAutonomy,
  'import-cost': benchImportCost,
  archival: benchArchival,
  metrics: benchMetrics,
  'inspector-latency': benchInspectorLatency,
  tracing: benchTracing,
  simulate: benchSimulate,
};

/**
 * `npm run bench`: every benchmark, each against its anchor in this same process run.
 * `npm run bench -- engine-dispatch hydration`: only those named.
 */
const names = process.argv.slice(2);
const unknown = names.filter((name) => !(name in benchmarks));
if (unknown.length > 0) {
  console.error(`unknown benchmark ${unknown.map((n) => `"${n}"`).join(', ')}; the benchmarks are: ${Object.keys(benchmarks).join(', ')}`);
  process.exit(2);
}
const results: boolean[] = [];
for (const [name, bench] of Object.entries(benchmarks)) if (names.length === 0 || names.includes(name)) results.push(await bench());
const failed = results.filter((ok) => !ok).length;
console.log(`\n${results.length - failed} of ${results.length} benchmarks meet their bar`);
process.exitCode = failed === 0 ? 0 : 1;
