import { isDeepStrictEqual } from 'node:util';
import { foldEvents } from '../../src/reducers/fold.js';
import type { Oracle, Finding } from './oracle.js';
import type { World } from '../world.js';

/**
 * The log keeps its word: every rune published (so acknowledged) is in the file, unchanged, after
 * any crash; every rune records the version of the machine that wrote it; and every stream's state
 * is the fold of its runes.
 */
export async function checkLog(world: World): Promise<Finding | undefined> {
  const published = new Map<string, Map<number, string>>();
  for (const rune of world.log) {
    let seqs = published.get(rune.stream);
    if (seqs === undefined) published.set(rune.stream, (seqs = new Map()));
    seqs.set(rune.seq, JSON.stringify([rune.kind, rune.at, rune.event]));
  }
  for (const { stream, machine } of await world.streams()) {
    const runes = await world.read(stream);
    const seqs = published.get(stream);
    if (seqs !== undefined) {
      const stored = new Map(runes.map((rune) => [rune.seq, JSON.stringify([rune.kind, rune.at, rune.event])]));
      for (const [seq, text] of seqs) {
        if (stored.get(seq) !== text) {
          return { oracle: 'log', message: `${stream} seq ${seq} was acknowledged but the file ${stored.has(seq) ? 'holds another rune there' : 'lost it'}`, stream };
        }
      }
    }
    const definition = world.engine.machines[machine];
    if (definition === undefined) return { oracle: 'log', message: `${stream}: the file names machine "${machine}", which the engine does not host`, stream };
    // Every rune says the version of the machine that wrote it: absent for version 1, else `v`.
    const unversioned = runes.find((rune) => (rune.v ?? 1) !== definition.version || (definition.version === 1 && Object.hasOwn(rune, 'v')));
    if (unversioned !== undefined) {
      return { oracle: 'log', message: `${stream} seq ${unversioned.seq}: its version ${String(unversioned.v)} is not machine "${machine}"'s ${definition.version}`, stream };
    }
    const folded = foldEvents(
      definition,
      undefined,
      0,
      runes.map((rune) => rune.event),
    );
    const snapshot = await world.engine.snapshot(stream);
    if (!isDeepStrictEqual(JSON.parse(JSON.stringify(snapshot?.state ?? null)), JSON.parse(JSON.stringify(folded ?? null)))) {
      return { oracle: 'log', message: `${stream}: the engine's state is not the fold of its ${runes.length} runes`, stream };
    }
  }
  return undefined;
}

export const logOracle = (): Oracle => ({ name: 'log', final: checkLog });
