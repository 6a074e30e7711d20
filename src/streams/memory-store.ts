import type { Rune } from '../reducers/rune.js';
import { StoreConflictError, StoreError, checkBatch, headMatches, prunePastSnapshot, openState, type RuneStore, type Snapshot, type StreamHead } from './store.js';

/**
 * A stream's runes, column by column. Rune objects are rebuilt on read: a log kept as millions
 * of rune objects is what the garbage collector spends its time copying, while these columns
 * keep only each event object and values the rune shares with its machine (kind and state names).
 */
interface MemoryStream {
  machine: string;
  seq: number;
  value?: string;
  at: number;
  /** Columns of the runes not pruned, in seq order: index `i` holds seq `firstSeq + i`. */
  events: Rune['event'][];
  kinds: string[];
  froms: (string | undefined)[];
  tos: (string | undefined)[];
  ats: number[];
  firstSeq: number;
  snapshot?: Snapshot;
}

const newStream = (machine: string): MemoryStream => ({ machine, seq: 0, at: 0, events: [], kinds: [], froms: [], tos: [], ats: [], firstSeq: 1 });

/** The rune at column index `i`, rebuilt as the engine built it (no `from`/`to` keys when absent). */
function runeAt(stream: string, s: MemoryStream, i: number): Rune {
  const seq = s.firstSeq + i;
  const from = s.froms[i];
  const to = s.tos[i];
  const rune: Rune = { stream, seq, machine: s.machine, kind: s.kinds[i]!, event: s.events[i]!, at: s.ats[i]! };
  if (from !== undefined) rune.from = from;
  if (to !== undefined) rune.to = to;
  return rune;
}

const headOf = (stream: string, s: MemoryStream): StreamHead =>
  s.value === undefined ? { stream, machine: s.machine, seq: s.seq, at: s.at } : { stream, machine: s.machine, seq: s.seq, value: s.value, at: s.at };

/**
 * A store in process memory: for tests, demos and embedding where durability is not wanted.
 * Same contract as every store (gapless seq enforced, atomic batches, snapshots, pruning). It has
 * `appendSync`, so an engine on it commits every dispatch as it is accepted: a rune is "durable"
 * (in this process's memory) before `dispatch` returns.
 *
 * @example
 * ```ts
 * import { createEngine, memoryStore } from 'runestream';
 * const engine = createEngine({ store: memoryStore() });
 * ```
 */
export function memoryStore(): RuneStore {
  const streams = new Map<string, MemoryStream>();
  const { open, close } = openState();

  /** Adds a rune whose seq was checked to continue `s`, its stream (undefined: a new stream). */
  const push = (s: MemoryStream | undefined, rune: Rune): void => {
    if (s === undefined) streams.set(rune.stream, (s = newStream(rune.machine)));
    s.events.push(rune.event);
    s.kinds.push(rune.kind);
    s.froms.push(rune.from);
    s.tos.push(rune.to);
    s.ats.push(rune.at);
    s.seq = rune.seq;
    s.value = rune.to;
    s.at = rune.at;
  };

  return {
    async append(runes) {
      open();
      checkBatch(runes, (stream) => streams.get(stream)?.seq ?? 0);
      for (const rune of runes) push(streams.get(rune.stream), rune);
    },
    appendSync(rune) {
      open();
      const s = streams.get(rune.stream);
      const seq = s?.seq ?? 0;
      if (rune.seq !== seq + 1) throw new StoreConflictError(rune.stream, seq + 1, rune.seq);
      push(s, rune);
    },
    async head(stream): Promise<StreamHead | undefined> {
      open();
      const s = streams.get(stream);
      return s === undefined ? undefined : headOf(stream, s);
    },
    async *heads(query = {}) {
      open();
      for (const stream of [...streams.keys()].sort()) {
        const head = headOf(stream, streams.get(stream)!);
        if (headMatches(head, query)) yield head;
      }
    },
    async read(stream, afterSeq = 0, limit = Infinity) {
      open();
      const s = streams.get(stream);
      if (s === undefined) return [];
      const from = Math.max(0, afterSeq + 1 - s.firstSeq);
      const to = Math.min(s.events.length, from + limit);
      const runes: Rune[] = [];
      for (let i = from; i < to; i++) runes.push(runeAt(stream, s, i));
      return runes;
    },
    async readEvents(stream, afterSeq = 0, limit = Infinity) {
      open();
      const s = streams.get(stream);
      if (s === undefined) return [];
      const from = Math.max(0, afterSeq + 1 - s.firstSeq);
      return s.events.slice(from, limit === Infinity ? undefined : from + limit);
    },
    async latestSnapshot(stream) {
      open();
      return streams.get(stream)?.snapshot;
    },
    async saveSnapshot(snapshot) {
      open();
      const s = streams.get(snapshot.stream);
      if (s === undefined) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no runes to snapshot`);
      if (snapshot.seq > s.seq) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no seq ${snapshot.seq} yet`);
      if ((s.snapshot?.seq ?? 0) <= snapshot.seq) s.snapshot = snapshot;
    },
    async prune(stream, throughSeq) {
      open();
      const s = streams.get(stream);
      if (s === undefined) return 0;
      const covered = s.snapshot?.seq ?? 0;
      if (throughSeq > covered) throw prunePastSnapshot(stream, throughSeq, covered);
      const count = Math.max(0, throughSeq - s.firstSeq + 1);
      for (const column of [s.events, s.kinds, s.froms, s.tos, s.ats]) column.splice(0, count);
      s.firstSeq += count;
      return count;
    },
    async close() {
      close();
    },
  };
}
