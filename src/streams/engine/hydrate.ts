import { foldEvents, foldRune } from '../../reducers/fold.js';
import type { AnyMachine } from '../../reducers/machine.js';
import type { Rune } from '../../reducers/rune.js';
import { hydrationChannel, type HydrationReport } from '../diagnostics.js';
import type { Seals } from '../seals.js';
import type { RuneStore, StreamHead } from '../store.js';
import { StreamReadError } from '../stream-read-error.js';
import { durableInstance, newerVersion, unknownMachine, type Instance } from './instance.js';

/** Events read per page when hydrating. */
const HYDRATION_PAGE = 10_000;

/** Where a stream is read from to be hydrated. */
export interface HydrationSource {
  readonly store: RuneStore;
  readonly machines: Readonly<Record<string, AnyMachine>>;
  /** The seals, when any machine seals or holds: a stream's ancestors' are learnt beside its head. */
  readonly seals: Seals | undefined;
  /** The instance of a stream in memory, if it is (whose seal is known already). */
  readonly inMemory: (stream: string) => Instance | undefined;
  /** Told of a read that failed (a damaged rune: the engine reports it). */
  readonly readFailed: (stream: string, error: unknown) => void;
}

/** The stream's head, and (with seals) its ancestors' seals learnt, side by side. */
export async function headOf(source: HydrationSource, stream: string): Promise<StreamHead | undefined> {
  if (source.seals === undefined) return source.store.head(stream);
  const [head] = await Promise.all([source.store.head(stream), source.seals.learn(stream, source.inMemory)]);
  return head;
}

/**
 * A stream hydrated from the store: from its newest snapshot, folding the events after it
 * (`foldEvents`) up to the head the store gave at the start (another writer may append while this
 * reads); a log that ends before its head is a `StreamReadError` `log_mismatch`, a machine this
 * engine does not host `unknown_machine`, a rune of a newer version of the machine `newer_version`. Then the runes another writer committed meanwhile, as
 * `arrived()` gives them once the reading is done, are folded on top. `undefined`: no such stream.
 */
export async function hydrate(source: HydrationSource, stream: string, arrived: () => readonly Rune[] | undefined): Promise<Instance | undefined> {
  const startedAt = hydrationChannel.hasSubscribers ? performance.now() : undefined;
  const { store, machines } = source;
  const head = await headOf(source, stream);
  if (head === undefined) return undefined;
  const machine = Object.hasOwn(machines, head.machine) ? machines[head.machine] : undefined;
  if (machine === undefined) throw unknownMachine(stream, head.machine);
  const snapshot = await store.latestSnapshot(stream);
  if (snapshot?.v !== undefined && snapshot.v > machine.version) {
    throw new StreamReadError(
      'newer_version',
      `stream "${stream}": its snapshot at seq ${snapshot.seq} was folded by version ${snapshot.v} of machine "${machine.id}", and this code runs version ${machine.version}; it is refused, never misread`,
    );
  }
  let state = snapshot?.state;
  let seq = snapshot?.seq ?? 0;
  while (seq < head.seq) {
    const events = await store.readEvents(stream, seq, Math.min(HYDRATION_PAGE, head.seq - seq)).catch((error: unknown) => {
      source.readFailed(stream, error);
      throw error;
    });
    if (events.length === 0) break;
    state = foldEvents(machine, state, seq, events);
    seq += events.length;
  }
  if (seq < head.seq) throw new StreamReadError('log_mismatch', `stream "${stream}": the store's head is seq ${head.seq} but its runes end at ${seq}`);
  // A stream's runes are written by ever newer versions (an older engine folds none of a newer
  // one's), so its last rune has the newest: one read, not a check of every rune.
  if (head.seq > 0) {
    const [last] = await store.read(stream, head.seq - 1, 1).catch((error: unknown) => {
      source.readFailed(stream, error);
      throw error;
    });
    const newer = last === undefined ? undefined : newerVersion(last, machine);
    if (newer !== undefined) throw newer;
  }
  let { at } = head;
  for (const rune of arrived() ?? []) {
    if (rune.seq !== seq + 1) continue; // read already (or, past a gap, left for the next load)
    const newer = newerVersion(rune, machine);
    if (newer !== undefined) throw newer;
    state = foldRune(machine, state, ++seq, rune.event);
    if (rune.at > at) at = rune.at;
  }
  // Runes since the snapshot count toward the next one, so a stream released often still gets one.
  const instance = durableInstance(stream, machine, state, seq, at, seq - (snapshot?.seq ?? 0));
  if (startedAt !== undefined) hydrationChannel.publish({ machine: machine.id, ms: performance.now() - startedAt } satisfies HydrationReport);
  return instance;
}
