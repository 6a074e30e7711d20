import { Subscription, type SchedulerLike, type Subscriber } from 'rxjs';
import type { CliProgramOutput } from '../src/agents.js';
import { below, type FakeTurn } from './fake-cli-turn.js';

/** How one fake run ended, or `running`. */
export type FakeRunEnd = 'running' | 'exited' | 'killed' | 'idle_timeout' | 'spawn_failed' | 'failed';

/** One run of a fake CLI (one process), as the oracle sees it. */
export interface FakeCliRun {
  /** Its pid: 1, 2, ... in the order runs were asked for. */
  readonly pid: number;
  readonly cli: 'fake-ndjson' | 'fake-acp';
  /** The session it ran for. */
  readonly stream: string;
  /** Why it started: `new_task`, `follow_up` or `resume`. */
  readonly start: 'new_task' | 'follow_up' | 'resume';
  /**
   * How it ended: `exited` by itself (see `exitCode`); `killed` by the session (unsubscribed: a
   * cancel, a state the process does not run in, the engine closing); `idle_timeout`, ended by the
   * session's idle clock; `spawn_failed`, it never ran; `failed`, a bug in the fake; or `running`.
   */
  readonly ended: FakeRunEnd;
  readonly exitCode?: number;
  /** What it did, in order: `turn:<end>`, `message`, `ask:tool`, `ask:command`, `approved`, `rejected`, `question`, `cancelled`, `exit:<code>`, ... */
  readonly did: readonly string[];
}

/** A run's record while it runs. */
export type FakeRunState = { -readonly [K in keyof FakeCliRun]: FakeCliRun[K] } & { did: string[] };

/** What the fake CLIs share: the simulation's randomness and clock, ids, and what the agents remember across processes. */
export interface FakeWorld {
  readonly random: () => number;
  readonly scheduler: SchedulerLike;
  readonly maxDelayMs: number;
  /** A new id: `<prefix>-1`, `<prefix>-2`, ... */
  nextId(prefix: string): string;
  /** A cline `ts`: the virtual time, always above the last one given (so a later run's messages are never taken for history). */
  nextTs(): number;
  /** Told what a fake could not read of what the adapter sent it (an oracle expects none). */
  protocolError(pid: number, text: string): void;
  /** cline's tasks, by task id: the messages it printed (what a `-T` run prints again). */
  readonly clineTasks: Map<string, object[]>;
  /** The ACP agent's sessions, by session id: the texts of its messages (what `session/load` replays). */
  readonly acpSessions: Map<string, string[]>;
}

/** What a fake program is given for its run. */
export interface FakeRunContext {
  readonly world: FakeWorld;
  readonly record: FakeRunState;
  /** The run's first turn, chosen when its process started. */
  readonly first: FakeTurn;
  /** The run's turn `index` (1, 2, ...), chosen when that prompt arrives. */
  turn(index: number): FakeTurn;
}

/**
 * One fake process: what it prints, each thing after a delay drawn from the world's `random` (0 to
 * `maxDelayMs`) on its scheduler, so a process never answers within the call that asked it (as a
 * real one cannot). Killed (`close`), nothing more of it runs.
 */
export class FakeProcess {
  readonly #jobs = new Subscription();
  #exited = false;

  constructor(
    private readonly subscriber: Subscriber<CliProgramOutput>,
    readonly context: FakeRunContext,
  ) {}

  /** Runs `step` after a drawn delay; `group` (a turn) can be cancelled as one. */
  later(step: () => void, group: Subscription = this.#jobs): void {
    const { scheduler, random, maxDelayMs } = this.context.world;
    const job = scheduler.schedule(
      () => {
        group.remove(job);
        if (!this.#exited) step();
      },
      below(random, maxDelayMs + 1),
    );
    group.add(job);
  }

  /** Runs `steps` one after the other, each after a drawn delay, then `then` (also after a delay). */
  sequence(steps: readonly (() => void)[], then: () => void, group: Subscription = this.#jobs): void {
    const next = (i: number): void =>
      this.later(() => {
        if (i === steps.length) return then();
        steps[i]!();
        next(i + 1);
      }, group);
    next(0);
  }

  /** A group of steps (a turn) that is cancelled as one, and with the process. */
  group(): Subscription {
    const group = new Subscription();
    this.#jobs.add(group);
    return group;
  }

  /** A line of JSON on stdout. */
  print(message: unknown): void {
    this.subscriber.next({ type: 'stdout', text: `${JSON.stringify(message)}\n` });
  }

  did(what: string): void {
    this.context.record.did.push(what);
  }

  /** It exits with `code`, after a line of stderr when it is not 0. */
  exit(code: number, why = 'the fake agent stopped'): void {
    if (this.#exited) return;
    this.#exited = true;
    this.did(`exit:${code}`);
    if (code !== 0) this.subscriber.next({ type: 'stderr', text: `${this.context.record.cli}: ${why}\n` });
    this.subscriber.next({ type: 'exit', code });
  }

  /** Killed: nothing scheduled runs. */
  close(): void {
    this.#exited = true;
    this.#jobs.unsubscribe();
  }
}
