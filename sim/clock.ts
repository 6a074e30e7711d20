import { VirtualTimeScheduler } from 'rxjs';

/** One turn of Node's event loop: the commit queue's batches and every promise chain move on. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The simulation's clock: virtual time on an rxjs `VirtualTimeScheduler`, advanced only by the
 * simulation, with the in-process asynchronous work (promises, the commit queue's turns) let run to
 * quiet between timers. A crash gives the next process a scheduler of its own that starts where
 * the old one stopped: the dead process's timers die with it.
 */
export class SimClock {
  #scheduler: VirtualTimeScheduler;

  constructor(
    /** Bumped by anything that moves (a rune, a model's part): `settle` waits until it stops. */
    private readonly activity: () => number,
    /** How many quiet turns in a row mean nothing more is coming. */
    private readonly quietTurns = 2,
    /** A bound on one settle, so a loop that never quiets is a finding, not a hang. */
    private readonly maxTurns = 20_000,
  ) {
    this.#scheduler = new VirtualTimeScheduler();
  }

  get scheduler(): VirtualTimeScheduler {
    return this.#scheduler;
  }

  /** Virtual now, in ms. */
  get now(): number {
    return this.#scheduler.now();
  }

  /** A new process's scheduler, starting at now; the old one's timers are dropped. */
  restart(): VirtualTimeScheduler {
    const now = this.now;
    for (const action of this.#scheduler.actions.splice(0)) action.unsubscribe();
    this.#scheduler = new VirtualTimeScheduler();
    this.#scheduler.frame = now;
    return this.#scheduler;
  }

  /**
   * Lets the in-process work run until nothing moves for `quietTurns` turns of the event loop.
   * Throws when it never quiets within `maxTurns` (something loops without end).
   */
  async settle(): Promise<void> {
    let quiet = 0;
    let last = this.activity();
    for (let turns = 0; quiet < this.quietTurns; turns++) {
      if (turns >= this.maxTurns) throw new Error(`the system did not quiet within ${this.maxTurns} turns of the event loop at ${this.now} ms`);
      await turn();
      const now = this.activity();
      quiet = now === last ? quiet + 1 : 0;
      last = now;
    }
  }

  /** Runs every timer due by `now + ms`, one instant at a time, settling after each. */
  async advance(ms: number): Promise<void> {
    const target = this.now + ms;
    await this.settle();
    for (;;) {
      const scheduler = this.#scheduler;
      const next = scheduler.actions[0];
      if (next === undefined || next.delay > target) break;
      scheduler.maxFrames = next.delay;
      scheduler.flush();
      await this.settle();
    }
    this.#scheduler.maxFrames = Number.POSITIVE_INFINITY;
    if (this.#scheduler.frame < target) this.#scheduler.frame = target;
  }

  /** When the next timer is due, if any. */
  nextDue(): number | undefined {
    return this.#scheduler.actions[0]?.delay;
  }
}
