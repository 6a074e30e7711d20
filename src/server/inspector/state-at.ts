import { foldEvents } from '../../reducers/fold.js';
import type { AnyMachine } from '../../reducers/machine.js';
import type { RuneStore } from '../../streams/store.js';
import { CHECKPOINT_EVERY, type TravelCheckpoints } from './travel-checkpoints.js';

/** A stream's state after rune `seq`, or why it cannot be told. */
export type StateAt =
  | { readonly ok: true; readonly state: unknown }
  | { readonly ok: false; readonly code: 'unknown_stream' | 'pruned' | 'beyond_head'; readonly message: string };

/**
 * The state of `stream` after its rune `seq`: the same fold the engine hydrates with
 * (`foldEvents`), from the nearest state known at or before `seq`:
 *
 * 1. the stream's latest snapshot, when `seq` is at or after it (the engine saves one every
 *    `snapshotEvery` runes: a seq near the head folds fewer runes than that);
 * 2. else a state an earlier time travel kept (`checkpoints`: every 1000th seq it folded past);
 * 3. else seq 1: `seq` runes. Where retention pruned the runes before the snapshot, that seq is
 *    `pruned`.
 *
 * The runes are read and folded a page of 1000 at a time.
 */
export async function stateAt(store: RuneStore, machine: AnyMachine, stream: string, seq: number, checkpoints?: TravelCheckpoints): Promise<StateAt> {
  const head = await store.head(stream);
  if (head === undefined) return { ok: false, code: 'unknown_stream', message: `unknown stream "${stream}"` };
  if (seq > head.seq) return { ok: false, code: 'beyond_head', message: `stream "${stream}" has ${head.seq} runes; there is no seq ${seq} yet` };
  const snapshot = await store.latestSnapshot(stream);
  let { state, seq: at } = snapshot !== undefined && snapshot.seq <= seq ? snapshot : { state: undefined as unknown, seq: 0 };
  const kept = checkpoints?.nearest(stream, seq, at);
  if (kept !== undefined) ({ state, seq: at } = kept);
  if (at === 0) {
    const [first] = await store.read(stream, 0, 1);
    if (first === undefined || first.seq > 1) {
      const from = first?.seq ?? head.seq + 1;
      return { ok: false, code: 'pruned', message: `the runes of "${stream}" before seq ${from} were pruned by retention; pick seq ${from - 1} or later` };
    }
  }
  while (at < seq) {
    const events = await store.readEvents(stream, at, Math.min(seq, at - (at % CHECKPOINT_EVERY) + CHECKPOINT_EVERY) - at);
    if (events.length === 0) break;
    state = foldEvents(machine, state, at, events);
    at += events.length;
    checkpoints?.keep(stream, at, state);
  }
  return { ok: true, state };
}
