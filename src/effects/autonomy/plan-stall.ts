import { NEVER, Observable, defer, distinctUntilChanged, filter, map, merge, of, scan, switchMap, toArray } from 'rxjs';
import { autonomyLoop } from '../../reducers/autonomy-loop/machine.js';
import type { AutonomyLoopEvent } from '../../reducers/autonomy-loop/schema.js';
import { isTaskActive } from '../../reducers/autonomy-loop/tasks.js';
import { restingStates } from '../../reducers/resting-states.js';
import type { Rune } from '../../reducers/rune.js';
import { agentStreams, parseStreamId } from '../../reducers/stream-ids.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import { firedByTimer } from '../../streams/fired-by-timer.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { resolveAutonomyOptions, type AutonomyOptions } from './autonomy-options.js';

/** The states in which a stream waits on a person by its name alone (a tool call awaiting approval), as `machine\nstate`. */
const WAITS_ON_A_PERSON = new Set(restingStates.filter((entry) => entry.rest === 'waiting' && entry.when === undefined).map((entry) => `${entry.machine}\n${entry.state}`));

/** Whether `stream` is one of an agent's (its lifecycle, turn, calls) or one of its sub-agents' (`<agent>.<call>`). */
const ofAgent = (stream: string, lifecycle: string): boolean => stream === lifecycle || stream.startsWith(`${lifecycle}/`) || stream.startsWith(`${lifecycle}.`);

/** A stream's latest position, from its stored head or a live rune. */
interface Mark {
  readonly stream: string;
  readonly machine: string;
  readonly seq: number;
  readonly at: number;
  readonly value: string | undefined;
}

/** What was heard: live runes, or the stored heads once listed (`listed`). */
interface Heard {
  readonly marks: readonly Mark[];
  readonly listed: boolean;
}

/** The agents' last activity and whether one of their streams waits on a person, once their heads are listed. */
interface Activity {
  readonly at: number;
  readonly waiting: boolean;
  readonly listed: boolean;
}

/**
 * The activity of an executing plan's working agents since the plan's last rune (`since`): their
 * stored heads, then every live rune of theirs. Live runes are heard from before the listing, so
 * none is missed in between; the later of a head and a rune of the same stream wins.
 */
function activity$(context: EpicContext, runes$: Observable<Rune>, since: number, agents: readonly string[]): Observable<Activity> {
  // With no agent at work there is nothing to list: the plan's own last rune is the activity.
  if (agents.length === 0) return of({ at: since, waiting: false, listed: true });
  const mine = (stream: string): boolean => agents.some((agent) => ofAgent(stream, agent));
  const heard$: Observable<Heard> = runes$.pipe(
    filter((rune) => mine(rune.stream)),
    map((rune) => ({ marks: [{ stream: rune.stream, machine: rune.machine, seq: rune.seq, at: rune.at, value: rune.to }], listed: false })),
  );
  const stored$: Observable<Heard> = merge(...agents.map((agent) => context.streams({ prefix: agent }))).pipe(
    filter((head) => mine(head.stream)),
    toArray(),
    map((heads) => ({ marks: heads.map((head) => ({ stream: head.stream, machine: head.machine, seq: head.seq, at: head.at, value: head.value })), listed: true })),
  );
  return defer(() => {
    const latest = new Map<string, Mark>();
    return merge(heard$, stored$).pipe(
      scan(
        (before: Activity, heard: Heard): Activity => {
          let at = before.at;
          for (const mark of heard.marks) {
            if ((latest.get(mark.stream)?.seq ?? 0) < mark.seq) latest.set(mark.stream, mark);
            at = Math.max(at, mark.at);
          }
          const waiting = [...latest.values()].some((mark) => WAITS_ON_A_PERSON.has(`${mark.machine}\n${mark.value}`));
          return { at, waiting, listed: before.listed || heard.listed };
        },
        { at: since, waiting: false, listed: false },
      ),
      filter((each) => each.listed),
    );
  });
}

/**
 * The stall stop of the autonomy loop: a plan in `executing` with no rune of its own and none of
 * the agents working its tasks (their lifecycle, turns, tool calls and sub-agents) for
 * `executingStallMs` -> `unresolvable` (reason `stalled: ...`) -> `stopped`, whose turns
 * `autonomyBudget`'s stop then interrupts. A durable deadline computed from the log (the plan's last
 * rune and the agents' streams' last runes), so a restart re-arms it at the same instant. While a
 * stream of those agents waits on a person (a tool call awaiting approval: its own timeout ends
 * that wait), no deadline runs: waiting for a person is not a stall.
 */
export function autonomyStall(autonomyOptions: AutonomyOptions): Epic {
  const { executingStallMs } = resolveAutonomyOptions(autonomyOptions);
  const stalled: AutonomyLoopEvent = {
    type: 'unresolvable',
    reason: `stalled: no rune of the plan or of its tasks' agents for ${executingStallMs} ms (executingStallMs)`,
  };
  return function autonomyStall(runes$, context, deps) {
    // The agents' streams may be another process's (several sharing one log): hear all of them.
    const everyRune$ = context.allRunes$ ?? runes$;
    const stall = stateEffects({
      name: 'autonomyStall',
      machine: autonomyLoop,
      states: ['executing'],
      withState: true,
      effects: (view): EffectsByKey<typeof autonomyLoop> => {
        const parts = parseStreamId(view.stream);
        if (parts?.kind !== 'plan') return {};
        const agents = [...new Set(view.state!.tasks.filter(isTaskActive).map((task) => agentStreams(parts.root, task.agentId!).lifecycle))];
        // Keyed by the plan's seq: each rune of the plan measures afresh from itself.
        return {
          [`stall@${view.seq}`]: activity$(context, everyRune$, view.at, agents).pipe(
            distinctUntilChanged((a, b) => a.at === b.at && a.waiting === b.waiting),
            switchMap(({ at, waiting }) => (waiting ? NEVER : durableDeadline(at + executingStallMs, stalled, context).pipe(firedByTimer(view.stream)))),
          ),
        };
      },
    });
    return stall(runes$, context, deps);
  };
}
