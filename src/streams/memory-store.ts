import type { Rune } from '../reducers/rune.js';
import { StoreError, checkBatch, headMatches, prunePastSnapshot, storeClosed, type RuneStore, type Snapshot, type StreamHead } from './store.js';

interface MemoryStream {
  machine: string;
  seq: number;
  value?: string;
  at: number;
  /** Runes not pruned, in seq order: `runes[i].seq === firstSeq + i`. */
  runes: Rune[];
  firstSeq: number;
  snapshot?: Snapshot;
}

const headOf = (stream: string, s: MemoryStream): StreamHead =>
  s.value === undefined ? { stream, machine: s.machine, seq: s.seq, at: s.at } : { stream, machine: s.machine, seq: s.seq, value: s.value, at: s.at };

/**
 * A store in process memory: for tests, demos and embedding where durability is not wanted.
 * Same contract as every store (gapless seq enforced, atomic batches, snapshots, pruning); a
 * batch is "durable" once `append` resolves, that is on the next microtask.
 *
 * @example
 * ```ts
 * import { createEngine, memoryStore } from 'runestream';
 * const engine = createEngine({ store: memoryStore() });
 * ```
 */
export function memoryStore(): RuneStore {
  const streams = new Map<string, MemoryStream>();
  let closed = false;
  const open = (): void => {
    if (closed) throw storeClosed();
  };

  return {
    async append(runes) {
      open();
      const heads = checkBatch(runes, (stream) => streams.get(stream)?.seq ?? 0);
      for (const rune of runes) {
        let s = streams.get(rune.stream);
        if (s === undefined) streams.set(rune.stream, (s = { machine: rune.machine, seq: 0, at: 0, runes: [], firstSeq: 1 }));
        s.runes.push(rune);
      }
      for (const [stream, seq] of heads) {
        const s = streams.get(stream)!;
        const last = s.runes[s.runes.length - 1]!;
        s.seq = seq;
        s.value = last.to;
        s.at = last.at;
      }
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
      return s.runes.slice(from, limit === Infinity ? undefined : from + limit);
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
      s.runes.splice(0, count);
      s.firstSeq += count;
      return count;
    },
    async close() {
      closed = true;
    },
  };
}
