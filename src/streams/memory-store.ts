import type { Rune } from '../reducers/rune.js';
import type { RuneOrigin } from '../reducers/rune-origin.js';
import {
  StoreConflictError,
  StoreError,
  StoreFencedError,
  checkBatch,
  checkRestore,
  headMatches,
  openState,
  prunePastSnapshot,
  type AppendOptions,
  type Fence,
  type RuneStore,
  type Snapshot,
  type StreamHead,
  type TailListener,
} from './store.js';

/** Runes per chunk: a power of two, so a seq finds its chunk with a shift and a mask. */
const CHUNK_BITS = 10;
const CHUNK = 1 << CHUNK_BITS;
/**
 * The capacity a young stream's chunk starts with, doubled as it fills, up to {@link CHUNK}: a
 * million streams of a few runes each must not hold a million whole chunks (about 40 KB each).
 */
const FIRST_CAPACITY = 1;

/**
 * {@link CHUNK} consecutive runes of a stream, column by column. Rune objects are rebuilt on read:
 * a log kept as millions of rune objects is what the garbage collector spends its time copying,
 * while these columns keep only each event object and values the rune shares with its machine
 * (kind and state names). A stream's chunks are allocated whole once it has {@link CHUNK} runes,
 * so appending to a long stream allocates nothing (columns grown rune by rune allocated ~100
 * bytes of copies per rune); a young stream's chunk starts at {@link FIRST_CAPACITY} and doubles.
 * Only the last chunk is ever short of {@link CHUNK}, so a seq's chunk is still a shift away.
 */
interface Chunk {
  /** How many of the chunk's slots hold a rune. */
  size: number;
  events: (Rune['event'] | undefined)[];
  kinds: string[];
  froms: (string | undefined)[];
  tos: (string | undefined)[];
  ats: Float64Array;
  /** Allocated at the chunk's first rune with a payload: runes without one cost nothing. */
  payloads: (Rune['payload'] | undefined)[] | undefined;
  /** The machine versions of its runes (`Rune.v`), allocated at the chunk's first rune with one. */
  versions: (number | undefined)[] | undefined;
  /** Their origins (`Rune.origin`: mostly a few shared objects), allocated at the chunk's first rune with one. */
  origins: (RuneOrigin | undefined)[] | undefined;
}

interface MemoryStream {
  machine: string;
  seq: number;
  value?: string;
  at: number;
  /** The runes, in seq order: seq `base + i` is in chunk `i >> CHUNK_BITS` at index `i & (CHUNK - 1)`. */
  chunks: Chunk[];
  /** The seq of the first rune of the first chunk. */
  base: number;
  /** The first seq not pruned (a pruned rune may still be in a chunk, its event dropped). */
  firstSeq: number;
  snapshot?: Snapshot;
}

const newStream = (machine: string): MemoryStream => ({ machine, seq: 0, at: 0, chunks: [], base: 1, firstSeq: 1 });

const newChunk = (capacity: number): Chunk => ({
  size: 0,
  events: new Array(capacity),
  kinds: new Array(capacity),
  froms: new Array(capacity),
  tos: new Array(capacity),
  ats: new Float64Array(capacity),
  payloads: undefined,
  versions: undefined,
  origins: undefined,
});

/** A copy of `column` with room for `capacity` slots. */
function widened<T>(column: T[], capacity: number): T[] {
  const wider = new Array<T>(capacity);
  for (let i = 0; i < column.length; i++) wider[i] = column[i]!;
  return wider;
}

/** Doubles a full chunk's capacity (it is short of {@link CHUNK}: a young stream's). */
function grow(c: Chunk): void {
  const capacity = Math.min(CHUNK, c.ats.length * 2);
  c.events = widened(c.events, capacity);
  c.kinds = widened(c.kinds, capacity);
  c.froms = widened(c.froms, capacity);
  c.tos = widened(c.tos, capacity);
  if (c.payloads !== undefined) c.payloads = widened(c.payloads, capacity);
  if (c.versions !== undefined) c.versions = widened(c.versions, capacity);
  if (c.origins !== undefined) c.origins = widened(c.origins, capacity);
  const ats = new Float64Array(capacity);
  ats.set(c.ats);
  c.ats = ats;
}

/** The rune of `seq`, rebuilt as the engine built it (no `from`/`to` keys when absent). */
function runeAt(stream: string, s: MemoryStream, seq: number): Rune {
  const i = seq - s.base;
  const c = s.chunks[i >> CHUNK_BITS]!;
  const j = i & (CHUNK - 1);
  const from = c.froms[j];
  const to = c.tos[j];
  const payload = c.payloads?.[j];
  const v = c.versions?.[j];
  const origin = c.origins?.[j];
  const rune: Rune = { stream, seq, machine: s.machine, kind: c.kinds[j]!, event: c.events[j]!, at: c.ats[j]! };
  if (from !== undefined) rune.from = from;
  if (to !== undefined) rune.to = to;
  if (payload !== undefined) rune.payload = payload;
  if (v !== undefined) rune.v = v;
  if (origin !== undefined) rune.origin = origin;
  return rune;
}

/** The seqs `read(afterSeq, limit)` covers: `[first, last]`, empty when `first > last`. */
function seqRange(s: MemoryStream, afterSeq: number, limit: number): [number, number] {
  const first = Math.max(afterSeq + 1, s.firstSeq);
  return [first, Math.min(s.seq, first + limit - 1)];
}

const headOf = (stream: string, s: MemoryStream): StreamHead =>
  s.value === undefined ? { stream, machine: s.machine, seq: s.seq, at: s.at } : { stream, machine: s.machine, seq: s.seq, value: s.value, at: s.at };

/** A committed rune waiting for its turn to reach the tail listeners, while they hear an earlier one. */
interface Undelivered {
  readonly rune: Rune;
  readonly position: number;
  readonly writer: string | undefined;
}

/** The first index of sorted `ids` whose id is not before `id`. */
function lowerBound(ids: readonly string[], id: string): number {
  let low = 0;
  let high = ids.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (ids[middle]! < id) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Two sorted lists of ids as one. */
function mergeSorted(a: readonly string[], b: readonly string[]): string[] {
  if (a.length === 0) return [...b];
  const merged = new Array<string>(a.length + b.length);
  let i = 0;
  let j = 0;
  for (let k = 0; k < merged.length; k++) merged[k] = j >= b.length || (i < a.length && a[i]! < b[j]!) ? a[i++]! : b[j++]!;
  return merged;
}

/**
 * A store in process memory: for tests, demos and embedding where durability is not wanted.
 * Same contract as every store (gapless seq enforced, atomic batches, snapshots, pruning). It has
 * `appendSync`, so an engine on it commits every dispatch as it is accepted: a rune is "durable"
 * (in this process's memory) before `dispatch` returns.
 *
 * Several engines may share one: it has `tail` (each listener hears every committed rune at once,
 * in commit order, even when a listener appends from inside its call) and it fences
 * (`raiseFence`; the newest epoch of each lease is kept in memory).
 *
 * @example
 * ```ts
 * import { createEngine, memoryStore } from 'runestream';
 * const engine = createEngine({ store: memoryStore() });
 * ```
 */
export function memoryStore(): RuneStore {
  const streams = new Map<string, MemoryStream>();
  // The stream ids in order, for `heads`: those created since it last listed wait in `unlisted`,
  // so a listing sorts only what is new and finds a prefix by binary search, not by a scan of all.
  let listed: string[] = [];
  let unlisted: string[] = [];
  const orderedIds = (): readonly string[] => {
    if (unlisted.length > 0) {
      listed = mergeSorted(listed, unlisted.sort());
      unlisted = [];
    }
    return listed;
  };
  const { open, close } = openState();
  /** The newest epoch seen of each lease. */
  const epochs = new Map<string, number>();
  /** Copied on write, so a listener may stop while it is being called. */
  let listeners: readonly TailListener[] = [];
  /** The position of the last committed rune. */
  let position = 0;
  /** Whether the listeners are being called: a rune committed meanwhile waits its turn in `undelivered`. */
  let delivering = false;
  const undelivered: Undelivered[] = [];

  /** Refuses an append with a fence older than its lease's newest epoch. */
  const checkFences = (fences: readonly Fence[]): void => {
    for (const fence of fences) {
      const newest = epochs.get(fence.lease);
      if (newest !== undefined && fence.epoch < newest) throw new StoreFencedError(fence, newest);
    }
  };
  const raise = (fence: Fence): void => {
    if ((epochs.get(fence.lease) ?? -Infinity) < fence.epoch) epochs.set(fence.lease, fence.epoch);
  };

  /** Numbers a rune just committed; with listeners, it joins those waiting for {@link deliverCommitted}. */
  const committed = (rune: Rune, writer: string | undefined): void => {
    const at = ++position;
    if (listeners.length > 0) undelivered.push({ rune, position: at, writer });
  };
  /** Tells every listener of the runes committed, in commit order, unless they are being told already. */
  const deliverCommitted = (): void => {
    if (delivering || undelivered.length === 0) return;
    delivering = true;
    try {
      for (let next = undelivered.shift(); next !== undefined; next = undelivered.shift()) deliver(next.rune, next.position, next.writer);
    } finally {
      delivering = false;
    }
  };
  const deliver = (rune: Rune, at: number, writer: string | undefined): void => {
    for (const listener of listeners) {
      try {
        listener(rune, at, writer);
      } catch (error) {
        // The rune is committed whatever a listener does: its error must not fail the append.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  };

  /** Adds a rune whose seq was checked to continue `s`, its stream (undefined: a new stream). */
  const push = (s: MemoryStream | undefined, rune: Rune): void => {
    if (s === undefined) {
      streams.set(rune.stream, (s = newStream(rune.machine)));
      unlisted.push(rune.stream);
    }
    let c = s.chunks[s.chunks.length - 1];
    if (c === undefined || c.size === CHUNK) s.chunks.push((c = newChunk(s.seq < CHUNK ? FIRST_CAPACITY : CHUNK)));
    else if (c.size === c.ats.length) grow(c);
    const j = c.size++;
    c.events[j] = rune.event;
    c.kinds[j] = rune.kind;
    c.froms[j] = rune.from;
    c.tos[j] = rune.to;
    c.ats[j] = rune.at;
    if (rune.payload !== undefined) (c.payloads ??= new Array(c.ats.length))[j] = rune.payload;
    if (rune.v !== undefined) (c.versions ??= new Array(c.ats.length))[j] = rune.v;
    if (rune.origin !== undefined) (c.origins ??= new Array(c.ats.length))[j] = rune.origin;
    s.seq = rune.seq;
    s.value = rune.to;
    s.at = rune.at;
  };

  return {
    async append(runes, options?: AppendOptions) {
      open();
      const fences = options?.fences;
      if (fences !== undefined) checkFences(fences);
      checkBatch(runes, (stream) => streams.get(stream)?.seq ?? 0);
      for (const rune of runes) push(streams.get(rune.stream), rune);
      if (fences !== undefined) fences.forEach(raise);
      for (const rune of runes) committed(rune, options?.writer);
      deliverCommitted();
    },
    appendSync(rune, options?: AppendOptions) {
      open();
      const fences = options?.fences;
      if (fences !== undefined) checkFences(fences);
      const s = streams.get(rune.stream);
      const seq = s?.seq ?? 0;
      if (rune.seq !== seq + 1) throw new StoreConflictError(rune.stream, seq + 1, rune.seq);
      push(s, rune);
      if (fences !== undefined) fences.forEach(raise);
      // The hot path: with no listener, only the position moves.
      if (listeners.length === 0) position++;
      else {
        committed(rune, options?.writer);
        deliverCommitted();
      }
    },
    tail(listener) {
      open();
      listeners = [...listeners, listener];
      return () => {
        listeners = listeners.filter((l) => l !== listener);
      };
    },
    async raiseFence(fence) {
      open();
      raise(fence);
    },
    async head(stream): Promise<StreamHead | undefined> {
      open();
      const s = streams.get(stream);
      return s === undefined ? undefined : headOf(stream, s);
    },
    async *heads(query = {}) {
      open();
      const { prefix = '' } = query;
      const ids = orderedIds();
      for (let i = lowerBound(ids, prefix); i < ids.length && ids[i]!.startsWith(prefix); i++) {
        const head = headOf(ids[i]!, streams.get(ids[i]!)!);
        if (headMatches(head, query)) yield head;
      }
    },
    async read(stream, afterSeq = 0, limit = Infinity) {
      open();
      const s = streams.get(stream);
      if (s === undefined) return [];
      const [first, last] = seqRange(s, afterSeq, limit);
      const runes: Rune[] = [];
      for (let seq = first; seq <= last; seq++) runes.push(runeAt(stream, s, seq));
      return runes;
    },
    async readEvents(stream, afterSeq = 0, limit = Infinity) {
      open();
      const s = streams.get(stream);
      if (s === undefined) return [];
      const [first, last] = seqRange(s, afterSeq, limit);
      const events: Rune['event'][] = [];
      for (let seq = first; seq <= last; seq++) {
        const i = seq - s.base;
        events.push(s.chunks[i >> CHUNK_BITS]!.events[i & (CHUNK - 1)]!);
      }
      return events;
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
      // Whole chunks go; in a chunk pruned in part, the pruned events and payloads are let go of.
      while (s.chunks.length > 0 && s.base + CHUNK - 1 <= throughSeq) {
        s.chunks.shift();
        s.base += CHUNK;
      }
      for (let seq = Math.max(s.firstSeq, s.base); seq <= throughSeq; seq++) {
        const c = s.chunks[0]!;
        c.events[seq - s.base] = undefined;
        if (c.payloads !== undefined) c.payloads[seq - s.base] = undefined;
      }
      s.firstSeq += count;
      return count;
    },
    async restore(runes) {
      open();
      const first = runes[0];
      if (first === undefined) return 0;
      const s = streams.get(first.stream);
      checkRestore(runes, s === undefined ? undefined : headOf(first.stream, s), s?.firstSeq ?? 1);
      // The chunks are rebuilt from the restored runes on: a seq still finds its chunk with a shift.
      const rebuilt = newStream(s!.machine);
      rebuilt.base = rebuilt.firstSeq = first.seq;
      rebuilt.seq = first.seq - 1;
      for (const rune of runes) push(rebuilt, rune);
      for (let seq = s!.firstSeq; seq <= s!.seq; seq++) push(rebuilt, runeAt(first.stream, s!, seq));
      s!.chunks = rebuilt.chunks;
      s!.base = rebuilt.base;
      s!.firstSeq = rebuilt.firstSeq;
      return runes.length;
    },
    async close() {
      close();
      listeners = [];
    },
  };
}
