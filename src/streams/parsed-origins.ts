import type { RuneOrigin } from '../reducers/rune-origin.js';

/**
 * Rune origins parsed from their stored JSON, by text: a log holds few distinct ones (one per
 * epic, one per client identity), so a read shares one frozen object per text instead of parsing
 * and holding one per rune. At most `max` texts are kept; past them the cache starts again.
 */
export class ParsedOrigins {
  readonly #byText = new Map<string, RuneOrigin>();
  constructor(private readonly max = 1024) {}

  parsed(text: string): RuneOrigin {
    let origin = this.#byText.get(text);
    if (origin === undefined) {
      if (this.#byText.size >= this.max) this.#byText.clear();
      origin = Object.freeze(JSON.parse(text) as RuneOrigin);
      this.#byText.set(text, origin);
    }
    return origin;
  }
}
