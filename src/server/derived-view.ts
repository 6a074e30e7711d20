import { foldRune } from '../reducers/fold.js';
import type { AnyMachine } from '../reducers/machine.js';
import type { Rune } from '../reducers/rune.js';
import type { Engine } from '../streams/engine.js';

/** A machine with a `derive`. */
type DerivingMachine = AnyMachine & { readonly derive: (state: unknown) => unknown };

/** The machine of a stream in memory, if it has a `derive` (what a state's derived view is computed with). */
export function derivingMachine(engine: Engine, stream: string): DerivingMachine | undefined {
  const id = engine.machineOf(stream);
  const machine = id !== undefined && Object.hasOwn(engine.machines, id) ? engine.machines[id] : undefined;
  return machine?.derive === undefined ? undefined : (machine as DerivingMachine);
}

/**
 * A stream's derived view (its machine's `derive`: an agent session's UI flags), kept current by
 * folding the stream's runes onto a state the server read, for a reader that gets runes, not
 * states (an SSE response). Only runes after that state change it: older ones, replayed to a
 * client that resumes, are the past, and the view it was sent first is already the current one.
 */
export class DerivedView {
  #state: unknown;
  #seq: number;
  #json: string;

  constructor(
    private readonly machine: DerivingMachine,
    seq: number,
    state: unknown,
  ) {
    this.#seq = seq;
    this.#state = state;
    this.#json = JSON.stringify(machine.derive(state));
  }

  /** The view as JSON: the current one. */
  get json(): string {
    return this.#json;
  }

  /** Folds the rune if it is the next one; the view as JSON if it changed, else `undefined`. */
  after(rune: Rune): string | undefined {
    if (rune.seq !== this.#seq + 1) return undefined;
    this.#seq = rune.seq;
    this.#state = foldRune(this.machine, this.#state, rune.seq, rune.event);
    const json = JSON.stringify(this.machine.derive(this.#state));
    if (json === this.#json) return undefined;
    this.#json = json;
    return json;
  }
}
