import { Observable, type SchedulerLike } from 'rxjs';
import { CliProcessError, acpCliAdapter, inProcessCli, ndjsonCliAdapter, type AgentCliSpec, type CliProgram, type SpawnCliProcess } from '../src/agents.js';
import { fakeAcpAgent } from './fake-acp-agent.js';
import { fakeCline } from './fake-cline.js';
import { drawTurn, type FakeCliName, type FakeTurn, type FakeTurnRequest } from './fake-cli-turn.js';
import type { FakeCliRun, FakeRunContext, FakeRunState, FakeWorld } from './fake-process.js';

export type { FakeCliName, FakeTurn, FakeTurnEnd, FakeTurnRequest } from './fake-cli-turn.js';
export { drawTurn } from './fake-cli-turn.js';
export type { FakeCliRun, FakeRunEnd } from './fake-process.js';

/** Options of {@link createFakeCli}. */
export interface FakeCliOptions {
  /** Decides everything the fakes do: each turn (see {@link drawTurn}) and each delay. Deterministic, in [0, 1). */
  readonly random: () => number;
  /** Their clock: every delay is scheduled here (a `VirtualTimeScheduler` in the simulation). Give the engine the same one. */
  readonly scheduler: SchedulerLike;
  /** The longest pause before each thing a fake prints or answers, in ms on `scheduler`. Default 1,000. */
  readonly maxDelayMs?: number;
  /** The CLIs' `idleTimeoutMs` (their specs'). Default: the sessions' own, 10 minutes. */
  readonly idleTimeoutMs?: number;
  /** Chooses each turn instead of {@link drawTurn} (a test that wants one story). Default `drawTurn`. */
  readonly turn?: (request: FakeTurnRequest) => FakeTurn;
}

/** What the fakes did, for an oracle. */
export interface FakeCliStats {
  /** Runs whose process started. */
  readonly spawned: number;
  /** Runs whose process did not start (a drawn spawn failure). */
  readonly spawnFailed: number;
  /** Runs started and not yet ended. */
  readonly alive: number;
  /** Every run asked for, in order. */
  readonly runs: readonly FakeCliRun[];
  /** What the fakes could not read of what the adapters sent them, `pid <n>: ...`: an oracle expects none. */
  readonly protocolErrors: readonly string[];
}

/** Two fake agent CLIs for `agentCliSessions`, run in this process. */
export interface FakeCli {
  /** `fake-ndjson` (cline's `--json`, {@link fakeCline}) and `fake-acp` (an ACP agent, {@link fakeAcpAgent}), for `agentCliSessions`' `clis`. */
  readonly clis: Readonly<Record<FakeCliName, AgentCliSpec>>;
  /** For `agentCliSessions`' `spawnProcess`: a run of either CLI as an in-process program (`inProcessCli`); any other command fails to spawn. */
  readonly spawnProcess: SpawnCliProcess;
  stats(): FakeCliStats;
  /** Runs started and not yet ended. */
  alive(): number;
}

/** The working directory the fakes are said to run in (nothing is read or written there). */
const CWD = '/fake-cli/workspace';
const PROGRAMS: Readonly<Record<FakeCliName, (context: FakeRunContext) => CliProgram>> = { 'fake-ndjson': fakeCline, 'fake-acp': fakeAcpAgent };
const isFakeCli = (command: string): command is FakeCliName => Object.hasOwn(PROGRAMS, command);

/**
 * Fake agent CLIs for the simulation: each run of a session is a program in this process
 * (`inProcessCli`), speaking cline's NDJSON or ACP to the real adapters, so sessions run end to end
 * with no OS process. What each run does comes from `random` and when from `scheduler`: the same
 * sequence of numbers on the same virtual clock gives the same runs.
 *
 * 1. A run's first turn is chosen when its process starts (a drawn `spawn_failed` means it does
 *    not start); an ACP run chooses a new turn for each later prompt. See {@link FakeTurn} for what
 *    a turn may do: stream text in chunks, ask for approval, ask a question, complete, fail, exit
 *    (0 or not, during an ask or not), or fall silent so the idle timeout ends it.
 * 2. The session ends a run by unsubscribing (cancel, a state without a process, the engine
 *    closing): the run is `killed` and nothing more of it is printed or scheduled.
 * 3. `stats()` counts runs started and failed, those alive, each run's session, start, end and
 *    what it did, and what the fakes could not read of what they were sent.
 *
 * ## Example
 * ```typescript
 * const scheduler = new VirtualTimeScheduler();
 * const fake = createFakeCli({ random: seededRandom(42), scheduler }); // any deterministic [0, 1) generator
 * const engine = createEngine({ store, scheduler, epics: [agentCliSessions({ clis: fake.clis, spawnProcess: fake.spawnProcess })] });
 * await engine.spawn('s1', 'agent-manager-session', { cli: 'fake-acp' });
 * await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
 * // ...step the scheduler; then: fake.alive(), fake.stats().runs
 * ```
 */
export function createFakeCli(options: FakeCliOptions): FakeCli {
  const { random, scheduler, maxDelayMs = 1_000, idleTimeoutMs, turn: chooseTurn = drawTurn } = options;
  if (typeof random !== 'function') throw new TypeError('createFakeCli: "random" must be a function returning numbers in [0, 1)');
  if (typeof scheduler?.schedule !== 'function') throw new TypeError('createFakeCli: "scheduler" must be an rxjs scheduler');
  if (!Number.isInteger(maxDelayMs) || maxDelayMs < 0) throw new TypeError(`createFakeCli: "maxDelayMs" must be a non-negative integer, got ${String(maxDelayMs)}`);

  const runs: FakeRunState[] = [];
  const protocolErrors: string[] = [];
  const ids = new Map<string, number>();
  let lastTs = 0;
  let spawned = 0;
  const world: FakeWorld = {
    random,
    scheduler,
    maxDelayMs,
    nextId: (prefix) => {
      const n = (ids.get(prefix) ?? 0) + 1;
      ids.set(prefix, n);
      return `${prefix}-${n}`;
    },
    nextTs: () => (lastTs = Math.max(scheduler.now(), lastTs + 1)),
    protocolError: (pid, text) => void protocolErrors.push(`pid ${pid}: ${text}`),
    clineTasks: new Map(),
    acpSessions: new Map(),
  };

  const spec = (name: FakeCliName): AgentCliSpec => ({
    adapter: name === 'fake-acp' ? acpCliAdapter : ndjsonCliAdapter,
    command: name,
    cwd: CWD,
    ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
  });

  const spawnProcess: SpawnCliProcess = (processOptions, { stream, run }) =>
    new Observable((subscriber) => {
      const { command } = processOptions;
      if (!isFakeCli(command)) {
        subscriber.error(new CliProcessError('spawn_failed', `could not start "${command}": the fake CLI runs only fake-ndjson and fake-acp`));
        return;
      }
      const record: FakeRunState = { pid: runs.length + 1, cli: command, stream, start: run.start.type, ended: 'running', did: [] };
      runs.push(record);
      const request = (index: number): FakeTurnRequest => ({ random, cli: command, stream, run, index });
      const first = chooseTurn(request(0));
      const context: FakeRunContext = { world, record, first, turn: (index) => chooseTurn(request(index)) };
      const program: CliProgram = (start) => {
        if (first.end.type === 'spawn_failed')
          throw new CliProcessError('spawn_failed', `could not start "${command}" in ${CWD}: ENOENT (a spawn failure the simulation drew)`);
        return PROGRAMS[command](context)(start);
      };
      const subscription = inProcessCli({ ...processOptions, pid: record.pid }, program).subscribe({
        next: (event) => {
          if (event.type === 'spawned') spawned++;
          else Object.assign(record, { ended: 'exited', exitCode: event.code });
          subscriber.next(event);
        },
        error: (error: unknown) => {
          record.ended = error instanceof CliProcessError ? error.code : 'failed';
          subscriber.error(error);
        },
        complete: () => subscriber.complete(),
      });
      return () => {
        subscription.unsubscribe();
        if (record.ended === 'running') record.ended = 'killed';
      };
    });

  const alive = (): number => runs.filter((run) => run.ended === 'running').length;
  return {
    clis: { 'fake-ndjson': spec('fake-ndjson'), 'fake-acp': spec('fake-acp') },
    spawnProcess,
    alive,
    stats: () => ({
      spawned,
      spawnFailed: runs.filter((run) => run.ended === 'spawn_failed').length,
      alive: alive(),
      runs: runs.map((run) => ({ ...run, did: [...run.did] })),
      protocolErrors: [...protocolErrors],
    }),
  };
}
