import { isDeepStrictEqual } from 'node:util';
import { foldEvents } from '../../src/reducers/fold.js';
import type { Oracle, Finding } from './oracle.js';
import type { Rune } from '../../src/reducers/rune.js';
import { SIM_CLIENT, type World } from '../world.js';

/**
 * The log keeps its word: every rune published (so acknowledged) is in the file, unchanged, after
 * any crash; every rune records the version of the machine that wrote it, and what its event came
 * from (the simulated client for what it dispatched and spawned, else one of the engine's epics by
 * name); and every stream's state is the fold of its runes.
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
    const wrongOrigin = runes.map((rune) => originFinding(world, rune)).find((why) => why !== undefined);
    if (wrongOrigin !== undefined) return { oracle: 'log', message: `${stream} ${wrongOrigin}`, stream };
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

/** What is wrong with a rune's origin, if anything: the client's runes say the client, every other names an epic the engine runs. */
function originFinding(world: World, rune: Rune): string | undefined {
  const { origin } = rune;
  const where = `seq ${rune.seq} (${rune.kind})`;
  if (origin === undefined) return `${where} records no origin`;
  const answered = world.clientRunes.has(`${rune.stream}#${rune.seq}`);
  if (origin.by === 'client') {
    if (!isDeepStrictEqual(origin, SIM_CLIENT)) return `${where} says it came from a client other than the simulation's: ${JSON.stringify(origin)}`;
    // A dispatch cut short by a crash may have been appended unanswered: the client tried it all the same.
    if (!answered && world.clientTried.get(rune.stream)?.has(rune.event.type) !== true)
      return `${where} says it came from the client, which never sent a ${rune.event.type} there`;
    return undefined;
  }
  if (answered) return `${where} was the client's, answered so, but says ${JSON.stringify(origin)}`;
  if (!world.epicNames.has(origin.epic)) return `${where} says it came from epic "${origin.epic}", which the engine does not run`;
  const madeBy = MADE_BY[rune.machine]?.[rune.kind];
  if (madeBy !== undefined && origin.by !== madeBy) return `${where} says ${JSON.stringify(origin)}, not that a ${madeBy} made it`;
  return undefined;
}

/** Runes only one kind of work makes, by machine and kind: a model's text, a tool's progress. */
const MADE_BY: Readonly<Record<string, Readonly<Record<string, 'model' | 'tool'>>>> = {
  'turn-engine': { 'turn.assistant_delta': 'model' },
  'tool-call': { 'tool.progress': 'tool' },
};
