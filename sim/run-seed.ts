import type { Rune } from '../src/reducers/rune.js';
import { defectOf } from './defects.js';
import { drawAction, drawMix, LogView, type ActionKind, type ActionRecord } from './actions.js';
import { budgetOracle } from './oracles/budget.js';
import { cliProcessesOracle } from './oracles/cli-processes.js';
import { invariantsOracle, turnPerAgentOracle } from './oracles/invariants.js';
import { livenessOracle } from './oracles/liveness.js';
import { checkLog, logOracle } from './oracles/log-integrity.js';
import { findingsOf, type Finding, type Findings, type Oracle } from './oracles/oracle.js';
import { sideEffectsOracle } from './oracles/side-effects.js';
import { staleWorkOracle } from './oracles/stale-work.js';
import { turnTextOracle } from './oracles/turn-text.js';
import { modelCallsOracle } from './oracles/model-calls.js';
import { watchesOracle } from './oracles/watches.js';
import { largestTimeout, World, type PlantedDefects } from './world.js';

/** Options of {@link runSeed}, with their defaults. */
export interface RunSeedOptions {
  /** How many actions the seed takes. Default 200. */
  readonly steps?: number;
  /** Told each step's action, for a verbose run. Default: nothing. */
  readonly onStep?: (step: number, record: ActionRecord, now: number) => void;
  /** Oracles to run besides (or, with `onlyExtraOracles`, instead of) the simulation's own: how a test plants one. */
  readonly extraOracles?: readonly Oracle[];
  /** Defects a test plants in the world's parts (a store that loses runes, an epic that overspends). */
  readonly planted?: PlantedDefects;
  /** Told the world before it starts: how a test plants a defect in what runs beside it (a tool run twice). */
  readonly plant?: (world: World) => void;
  /** Weights that replace the seed's own mix for some kinds of action (0 turns one off). */
  readonly mix?: Partial<Record<ActionKind, number>>;
}

/** What one seed did: its size, and the first finding, with the step that led to it. */
export interface SeedResult {
  readonly seed: number;
  readonly steps: number;
  readonly runes: number;
  readonly virtualMs: number;
  readonly crashes: number;
  /** What the oracles found, in order: each known defect's first finding, then the first new failure (which ended the run). */
  readonly failures: readonly Failure[];
  /** A failure no known defect explains, if one was found. */
  readonly newFailure?: Failure;
  /** The log, one line a rune (stream, seq, kind, at, event): byte-identical for two runs of a seed. */
  readonly transcript: string;
}

export interface Failure extends Finding {
  /** The step after which it was found (`steps + 1`: at the end, once the run went quiet). */
  readonly step: number;
  /** The actions up to it, the last ones. */
  readonly actions: readonly string[];
  /** The runes that led there: of the stream to blame if there is one, else the last of the log. */
  readonly runes: readonly string[];
}

/** How many times the quiet wait at the end is extended while runes keep coming. */
const QUIET_EXTENSIONS = 5;

const line = (rune: Rune): string => `${rune.stream} #${rune.seq} ${rune.kind}${rune.to === undefined ? '' : ` -> ${rune.to}`} @${rune.at} ${JSON.stringify(rune.event)}`;
const describeAction = (step: number, record: ActionRecord, now: number): string =>
  `step ${step} @${now}: ${record.kind}${record.stream === undefined ? '' : ` ${record.stream}`}${record.event === undefined ? '' : ` ${JSON.stringify(record.event)}`}${record.outcome === undefined ? '' : ` -> ${record.outcome}`}`;

/** The log as the file holds it: every stream in id order, each rune a line. */
async function fileTranscript(world: World): Promise<string> {
  const streams = (await world.streams()).map((head) => head.stream).sort();
  const lines: string[] = [];
  for (const stream of streams) for (const rune of await world.read(stream)) lines.push(line(rune));
  return lines.join('\n');
}

/**
 * Runs one seed of the simulation: the world it makes, `steps` actions drawn from it, the oracles
 * after every step, then, once virtual time has gone far past the last client action, the final
 * oracles (liveness, the log against the file).
 */
export async function runSeed(seed: number, options: RunSeedOptions = {}): Promise<SeedResult> {
  const { steps = 200, onStep, extraOracles = [], plant, planted, mix: mixOverride } = options;
  const world = new World(seed, planted);
  const view = new LogView();
  const oracles: Oracle[] = [
    invariantsOracle(),
    turnPerAgentOracle(),
    budgetOracle(world.llm, world.settings.conversationModelCalls),
    sideEffectsOracle(world.tools),
    staleWorkOracle(),
    turnTextOracle(world.llm),
    modelCallsOracle(),
    cliProcessesOracle(world.cli),
    watchesOracle(),
    // The log first: a lost rune explains whatever else looks wrong after it.
    logOracle(),
    livenessOracle(),
    ...extraOracles,
  ];
  let step = 0;
  /** Each known defect's first finding, in order, then the first new failure, which ends the run. */
  const failures: Failure[] = [];
  const defectsSeen = new Set<string>();
  let newFailure: Failure | undefined;
  const history: string[] = [];
  const fail = (finding: Finding, at: number): Failure => {
    const runes = finding.stream === undefined ? world.log.slice(-30) : world.log.filter((rune) => rune.stream === finding.stream).slice(-30);
    return { ...finding, step: at, actions: history.slice(-15), runes: runes.map(line) };
  };
  /** Takes what an oracle found: a known defect once (the run goes on: it may hide others), a new failure ends the run. */
  const take = (findings: Findings, at = step): void => {
    for (const finding of findingsOf(findings)) {
      if (newFailure !== undefined) return;
      const failure = fail(finding, at);
      const defect = defectOf(failure);
      if (defect !== undefined && defectsSeen.has(defect.name)) continue;
      if (defect === undefined) newFailure = failure;
      else defectsSeen.add(defect.name);
      failures.push(failure);
    }
  };
  world.onRune((rune) => {
    view.see(rune);
    for (const oracle of oracles) take(oracle.see?.(rune, view));
  });
  plant?.(world);
  const random = world.random.fork();
  const mix = { ...drawMix(random), ...mixOverride };
  let lastClientAt = 0;
  let transcript = '';
  world.start();
  try {
    for (step = 1; step <= steps && newFailure === undefined; step++) {
      const action = drawAction(random, mix);
      const logBefore = world.log.length;
      const record = await action.run(world, view, random);
      if (action.source === 'client') lastClientAt = world.clock.now;
      history.push(describeAction(step, record, world.clock.now));
      onStep?.(step, record, world.clock.now);
      await world.clock.advance(random.int(0, 2_000));
      if (record.expectRejection !== undefined) {
        const stream = record.stream === undefined ? {} : { stream: record.stream };
        if (!record.expectRejection.some((code) => record.outcome === `rejected ${code}`)) {
          take({
            oracle: 'bad input',
            message: `${record.kind} on ${record.stream}: expected a rejection (${record.expectRejection.join(' or ')}), got ${record.outcome}`,
            ...stream,
          });
        }
        // Refused, and nothing of it in the log: no rune on its stream carries the refused event.
        const sent = JSON.stringify(record.event);
        const stored = world.log.slice(logBefore).find((rune) => rune.stream === record.stream && JSON.stringify(rune.event) === sent);
        if (stored !== undefined)
          take({ oracle: 'bad input', message: `${record.kind} was refused (${record.outcome}), yet ${record.stream} seq ${stored.seq} holds it`, ...stream });
      }
      for (const oracle of oracles) take(await oracle.check?.(world, view));
      if (record.kind === 'crash and restart') take(await checkLog(world));
    }
    if (newFailure === undefined) {
      // Quiet: long enough after the last client action, and after the last rune, for every
      // timeout to have fired twice. Work still moving is not stuck (a slow answer after a round
      // of calls that each waited out its approval, one by one); the extensions are bounded, so
      // what ticks for ever is judged too. After the last rune from the start: a last action that
      // jumped past the window after the client's has not let the work it set moving go quiet.
      const window = 2 * largestTimeout(world.settings) + 60_000;
      let until = Math.max(lastClientAt, world.log.at(-1)?.at ?? 0) + window;
      for (let extension = 0; until > world.clock.now && extension <= QUIET_EXTENSIONS; extension++) {
        await world.clock.advance(until - world.clock.now);
        until = (world.log.at(-1)?.at ?? 0) + window;
      }
      step = history.length + 1;
      for (const oracle of oracles) take(await oracle.check?.(world, view));
      for (const oracle of oracles) take(await oracle.final?.(world, view));
    }
  } catch (error) {
    take({ oracle: 'crash of the simulation', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  } finally {
    transcript = await fileTranscript(world).catch((error: unknown) => `the file could not be read: ${String(error)}`);
    await world.close();
  }
  return {
    seed,
    steps: history.length,
    runes: world.log.length,
    virtualMs: world.clock.now,
    crashes: world.processes - 1,
    failures,
    ...(newFailure === undefined ? {} : { newFailure }),
    transcript,
  };
}
