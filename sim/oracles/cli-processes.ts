import type { LogView } from '../actions.js';
import type { FakeCli } from '../fake-cli.js';
import type { Oracle } from './oracle.js';

/**
 * Where a CLI's process may run, as seed 001 and the README say: an ACP agent's lives across turns
 * (from `creating` through `completed`), cline's NDJSON runs one task (`creating`, `streaming`,
 * `waiting_approval`). A fake run alive for a session in any other state was left behind.
 */
const PROCESS_STATES: Readonly<Record<string, ReadonlySet<string>>> = {
  'fake-acp': new Set(['creating', 'streaming', 'waiting_approval', 'waiting_input', 'completed']),
  'fake-ndjson': new Set(['creating', 'streaming', 'waiting_approval']),
};

/**
 * CLI processes, counted by the fake CLIs themselves: no run outlives its session's need of it (a
 * cancel, an error, a pause end it), and nothing the adapters sent them was unreadable.
 */
export const cliProcessesOracle = (cli: FakeCli): Oracle => ({
  name: 'cli processes',
  check(_world, view: LogView) {
    const stats = cli.stats();
    const [protocolError] = stats.protocolErrors;
    if (protocolError !== undefined) return { oracle: 'cli processes', message: `a fake CLI could not read what its adapter sent: ${protocolError}` };
    for (const run of stats.runs) {
      if (run.ended !== 'running') continue;
      const state = view.value.get(run.stream);
      if (state !== undefined && !PROCESS_STATES[run.cli]!.has(state)) {
        return {
          oracle: 'cli processes',
          message: `${run.cli} run ${run.pid} (${run.start}) still runs for ${run.stream}, which is "${state}": its process was left behind`,
          stream: run.stream,
        };
      }
    }
    return undefined;
  },
});
