import { benchAgentDeltas } from './agent-deltas.js';
import { benchChatActorTransition } from './chat-actor-transition.js';
import { benchEngineDispatch } from './engine-dispatch.js';
import { benchHydration } from './hydration.js';
import { benchIdleSessions } from './idle-sessions.js';
import { benchSqliteAppend } from './sqlite-append.js';
import { benchWsFanout } from './ws-fanout.js';

/** `npm run bench`: every benchmark, each against its anchor in this same process run. */
const results = [benchChatActorTransition(), await benchEngineDispatch(), await benchSqliteAppend(), await benchIdleSessions(), await benchHydration(), await benchWsFanout(), await benchAgentDeltas()];
const failed = results.filter((ok) => !ok).length;
console.log(`\n${results.length - failed} of ${results.length} benchmarks meet their bar`);
process.exitCode = failed === 0 ? 0 : 1;
