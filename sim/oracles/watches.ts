import type { Rune } from '../../src/reducers/rune.js';
import type { Watch, World } from '../world.js';
import type { Finding, Oracle } from './oracle.js';

const found = (watch: Watch, message: string): Finding => ({
  oracle: 'watches',
  message: `a client watching ${watch.stream} after seq ${watch.afterSeq} (process ${watch.process}): ${message}`,
  stream: watch.stream,
});

/** A rune as a client compares it with the file's: what it says, not how it was built. */
const said = (rune: Rune): string => JSON.stringify([rune.stream, rune.seq, rune.machine, rune.kind, rune.event, rune.from, rune.to, rune.at, rune.payload]);

/**
 * What clients watching a stream hear (`runes$(stream, afterSeq)`, see `World`): its runes after
 * `afterSeq`, each once, in seq order, with no gap where the replay of the stored ones meets the
 * live ones; a feed that ends when its process dies ends complete, never with an error (one
 * subscribed while its engine closes, or after, included); and each rune heard is the one the
 * file holds.
 */
export const watchesOracle = (): Oracle => {
  const reported = new Set<Watch>();
  return {
    name: 'watches',
    check(world: World) {
      const findings: Finding[] = [];
      for (const watch of world.watches) {
        if (reported.has(watch)) continue;
        const report = (message: string): void => {
          reported.add(watch);
          findings.push(found(watch, message));
        };
        if (typeof watch.ended === 'object') {
          report(`its feed failed: ${String(watch.ended.error)}`);
          continue;
        }
        for (; watch.checked < watch.runes.length; watch.checked++) {
          const rune = watch.runes[watch.checked]!;
          const expected = watch.afterSeq + watch.checked + 1;
          if (rune.stream !== watch.stream || rune.seq !== expected) {
            report(`heard ${rune.stream} seq ${rune.seq} where seq ${expected} was due`);
            break;
          }
        }
      }
      return findings;
    },
    async final(world: World) {
      const findings: Finding[] = [];
      for (const watch of world.watches) {
        if (reported.has(watch) || watch.runes.length === 0) continue;
        const stored = new Map((await world.read(watch.stream)).map((rune) => [rune.seq, rune]));
        const differs = watch.runes.find((rune) => stored.get(rune.seq) === undefined || said(stored.get(rune.seq)!) !== said(rune));
        if (differs !== undefined) findings.push(found(watch, `heard seq ${differs.seq} (${differs.kind}) other than the file holds it`));
      }
      return findings;
    },
  };
};
