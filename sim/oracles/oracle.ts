import type { Rune } from '../../src/reducers/rune.js';
import type { LogView } from '../actions.js';
import type { World } from '../world.js';

/** What an oracle found wrong: its name, and a message naming the streams involved. */
export interface Finding {
  readonly oracle: string;
  readonly message: string;
  /** The stream whose runes the report prints, if one is to blame. */
  readonly stream?: string;
}

/**
 * A check that does not trust the code under test: it reads the log as it is published, the files
 * the store wrote, and the books the world outside keeps (the model API's calls, the tools' runs).
 */
export interface Oracle {
  readonly name: string;
  /** Told each rune as it is published, after the view saw it. */
  see?(rune: Rune, view: LogView): Findings;
  /** After every step. */
  check?(world: World, view: LogView): Findings | Promise<Findings>;
  /** Once the run has gone quiet, at its end. */
  final?(world: World, view: LogView): Findings | Promise<Findings>;
}

/** What an oracle says: nothing, one finding, or several (each is classified on its own). */
export type Findings = Finding | readonly Finding[] | undefined;

/** Findings as a list. */
export const findingsOf = (findings: Findings): readonly Finding[] => (findings === undefined ? [] : 'oracle' in findings ? [findings] : findings);
