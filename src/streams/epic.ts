import { Observable, defer, retry, timer, type SchedulerLike, type Subscription } from 'rxjs';
import { exponentialDelay } from '../reducers/backoff.js';
import type { EffectOwnership } from './effect-host.js';
import type { DispatchSink } from './submit.js';
import type { HeadsQuery, Snapshot, StreamHead } from './store.js';
import type { AnyMachine, EventObject, StateOf } from '../reducers/machine.js';
import type { Rune } from '../reducers/rune.js';
import type { EffectSource, RuneOrigin } from '../reducers/rune-origin.js';
import type { ValueCheck } from '../reducers/value-limits.js';

/** What an epic asks the engine to do: dispatch `event` to `stream`, or spawn `stream`. */
export type EpicCommand = DispatchCommand | SpawnCommand;

/** Dispatch `event` to `stream`. */
export interface DispatchCommand {
  readonly stream: string;
  /** Any event object; the engine validates it against the stream's machine. */
  readonly event: EventObject & Readonly<Record<string, unknown>>;
  /** What in the epic made it when not its reaction to runes: a timer, a model's answer, a tool's result (the rune's `origin.by`). */
  readonly by?: EffectSource;
}

/**
 * Spawn `stream` as an instance of machine `spawn` with `input`. A stream that exists already is
 * left as it is, unreported: epics that create streams on demand (a breaker per provider, say)
 * may race each other, and the first one wins.
 */
export interface SpawnCommand {
  readonly stream: string;
  /** The machine id. */
  readonly spawn: string;
  readonly input?: unknown;
  /** As a dispatch's `by`. */
  readonly by?: EffectSource;
}

/** Whether a command spawns a stream (else it dispatches an event). */
export const isSpawnCommand = (command: EpicCommand): command is SpawnCommand => 'spawn' in command;

/** What an epic may read and do besides emitting commands. */
export interface EpicContext {
  /**
   * The durable state of a stream that is in memory, or `undefined` (not in memory, or unknown).
   * Given the stream's machine, it is typed as that machine's state; the machine is not checked
   * at run time, so pass the one the stream was spawned as (as `ofMachine` or a stream naming
   * scheme tells).
   */
  state<M extends AnyMachine>(stream: string, machine: M): StateOf<M> | undefined;
  state<S = unknown>(stream: string): S | undefined;
  /**
   * The durable state of any stream and its seq, hydrating it if need be, then completes;
   * `undefined` for an unknown stream. An Observable, like `read` and `streams`: a test context
   * answers with `of(...)`, and the epic runs in the frames of a marble test. Given the stream's
   * machine, the state is typed as that machine's, as for `state`.
   */
  snapshot<M extends AnyMachine>(stream: string, machine: M): Observable<Snapshot<StateOf<M>> | undefined>;
  snapshot<S = unknown>(stream: string): Observable<Snapshot<S> | undefined>;
  /** The stream's stored runes after `afterSeq` (default 0), then completes: its history, for an effect that needs it. */
  read(stream: string, afterSeq?: number): Observable<Rune>;
  /** Releases a stream's instance from memory; the next use hydrates it from the store. */
  release(stream: string): void;
  /**
   * The seq of the newest rune of `stream` this engine has taken whose publication to the epics
   * is still to come (its append under way), or `undefined` when none is: a listing of heads
   * that finds that rune stored leaves the stream to its live rune, which is on its way, rather
   * than take it for one found after a restart. Optional: a test context without one has none.
   */
  unpublishedSeq?(stream: string): number | undefined;
  /**
   * The heads of the stored streams the query matches: how an epic resumes, when it starts, the
   * effects its streams still need (the Moorex idea: effects follow from state, so a restart
   * re-derives them). Completes after the last one.
   */
  streams(query?: HeadsQuery): Observable<StreamHead>;
  /** The engine's scheduler: every timer of an epic runs on it, so tests run in virtual time. */
  readonly scheduler: SchedulerLike;
  /**
   * The engine's check of a value against its `limits`, as `dispatch` applies it to every event
   * (root `event`): an effect that makes an event from what it does not control (a tool's result)
   * checks it first, and ends its work with an error it can store instead of a refused dispatch.
   * Absent: no limits (every one `Infinity`), or a context without an engine.
   */
  readonly valueCheck?: ValueCheck;
  /** Reports a failure no command carries (an effect that failed); the engine puts it on `errors$`. */
  report?(report: EpicReport): void;
  /** Which streams' effects this process runs (see `stateEffects`). Absent: all of them. */
  readonly ownership?: EffectOwnership;
  /**
   * With `ownership`, every live rune, of owned streams or not (the epic's own `runes$` carries
   * only the owned ones): for an effect that watches streams another process may own (a
   * provider's breaker), or keeps this process's own state. Absent: `runes$` is all of them.
   */
  readonly allRunes$?: Observable<Rune>;
}

/**
 * An epic: a plain function from the live runes of every stream to commands (redux-observable's
 * idea, with runes for actions). It never sees replayed runes, only what is appended while it runs.
 * Test one by calling it with a hot observable of runes and a context; no engine needed.
 */
export type Epic<Deps = unknown> = (runes$: Observable<Rune>, context: EpicContext, deps: Deps) => Observable<EpicCommand>;

/** What happened to an epic or to a command it emitted. */
export type EpicReport =
  | { type: 'epic_failed'; epic: string; error: unknown; retryInMs: number }
  | { type: 'effect_failed'; epic: string; stream: string; key?: string; error: unknown }
  | { type: 'command_rejected'; epic: string; command: EpicCommand; code: string; reason: string }
  | { type: 'command_failed'; epic: string; command: EpicCommand; error: unknown }
  /** What an effect left out on purpose, and why (a line of a CLI's output no event matches): bounded by the effect. */
  | { type: 'output_ignored'; epic: string; stream: string; reason: string };

/** Options of {@link runEpics}. */
export interface RunEpicsOptions<Deps> {
  readonly epics: readonly Epic<Deps>[];
  readonly runes$: Observable<Rune>;
  readonly context: EpicContext;
  readonly deps: Deps;
  /**
   * Carries out one command and tells `sink` its outcome, with `token` (the command) handed back:
   * one sink per epic, so no promise or closure is made per command (a model's every delta is one).
   * `origin` names the epic, and what in it made the command (its `by`).
   */
  readonly dispatch: <T>(command: EpicCommand, sink: DispatchSink<T>, token: T, origin: RuneOrigin) => void;
  readonly report: (report: EpicReport) => void;
  /** First delay before resubscribing a failed epic; it doubles per consecutive failure. Default 1000 ms. */
  readonly retryBaseMs?: number;
  /** Longest delay between resubscriptions. Default 30,000 ms. */
  readonly retryMaxMs?: number;
}

/** The origins of an epic's commands, by what made them: made once per epic, frozen (the engine checks each once). */
const epicOrigins = (epic: string): Readonly<Record<'epic' | EffectSource, RuneOrigin>> => ({
  epic: Object.freeze({ by: 'epic', epic }),
  timer: Object.freeze({ by: 'timer', epic }),
  model: Object.freeze({ by: 'model', epic }),
  tool: Object.freeze({ by: 'tool', epic }),
});

/** The name an epic is reported under: its function name, else its position. */
export const epicName = (epic: Epic<never>, index: number): string => epic.name || `epic #${index + 1}`;

/**
 * Runs epics against the live runes and dispatches what they emit.
 *
 * 1. Each epic is subscribed once; what it emits is dispatched, its runes' `origin` naming the
 *    epic (`{ by: 'epic', epic }`, or the command's `by`: `timer`, `model`, `tool`); a rejected
 *    command is reported (`command_rejected`), never thrown.
 * 2. An epic that errors (or throws when called) is reported (`epic_failed`) and resubscribed after
 *    a backoff on the context's scheduler: `retryBaseMs`, doubling, at most `retryMaxMs`. It never
 *    stops another epic or the engine.
 * 3. An epic that completes is done. Unsubscribing the returned subscription stops them all.
 */
export function runEpics<Deps>(options: RunEpicsOptions<Deps>): Subscription {
  const { epics, runes$, context, deps, dispatch, report, retryBaseMs = 1000, retryMaxMs = 30_000 } = options;
  const all = new Observable<never>((subscriber) => {
    epics.forEach((epic, index) => {
      const name = epicName(epic as Epic<never>, index);
      const commands$ = defer(() => epic(runes$, context, deps)).pipe(
        retry({
          delay: (error: unknown, attempt: number) => {
            const retryInMs = exponentialDelay(attempt, retryBaseMs, retryMaxMs);
            report({ type: 'epic_failed', epic: name, error, retryInMs });
            return timer(retryInMs, context.scheduler);
          },
          // Not reset by an emission: an epic that emits, then fails at once, must still back off.
          resetOnSuccess: false,
        }),
      );
      const outcomes: DispatchSink<EpicCommand> = {
        result: (result, command) => {
          if (result.accepted || (result.code === 'stream_exists' && isSpawnCommand(command))) return;
          report({ type: 'command_rejected', epic: name, command, code: result.code, reason: result.reason });
        },
        error: (error, command) => report({ type: 'command_failed', epic: name, command, error }),
      };
      const origins = epicOrigins(name);
      subscriber.add(commands$.subscribe((command) => dispatch(command, outcomes, command, origins[command.by ?? 'epic'])));
    });
  });
  return all.subscribe();
}
