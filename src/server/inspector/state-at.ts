import { foldEvents } from '../../reducers/fold.js';
import type { AnyMachine } from '../../reducers/machine.js';
import type { RuneStore } from '../../streams/store.js';

/** Events read per page while folding. */
const PAGE = 1000;

/** A stream's state after rune `seq`, or why it cannot be told. */
export type StateAt =
  | { readonly ok: true; readonly state: unknown }
  | { readonly ok: false; readonly code: 'unknown_stream' | 'pruned' | 'beyond_head'; readonly message: string };

/**
 * The state of `stream` after its rune `seq`: the same fold the engine hydrates with
 * (`foldEvents`), over the stored events 1..`seq`, or from the latest snapshot at or before `seq`
 * when retention pruned the runes before it. What the inspector's time travel shows.
 */
export async function stateAt(store: RuneStore, machine: AnyMachine, stream: string, seq: number): Promise<StateAt> {
  const head = await store.head(stream);
  if (head === undefined) return { ok: false, code: 'unknown_stream', message: `unknown stream "${stream}"` };
  if (seq > head.seq) return { ok: false, code: 'beyond_head', message: `stream "${stream}" has ${head.seq} runes; there is no seq ${seq} yet` };
  let state: unknown;
  let at = 0;
  const [first] = await store.read(stream, 0, 1);
  if (first === undefined || first.seq > 1) {
    const snapshot = await store.latestSnapshot(stream);
    if (snapshot === undefined || snapshot.seq > seq) {
      const kept = first?.seq ?? head.seq + 1;
      return { ok: false, code: 'pruned', message: `the runes of "${stream}" before seq ${kept} were pruned by retention; pick seq ${kept - 1} or later` };
    }
    state = snapshot.state;
    at = snapshot.seq;
  }
  while (at < seq) {
    const events = await store.readEvents(stream, at, Math.min(PAGE, seq - at));
    if (events.length === 0) break;
    state = foldEvents(machine, state, at, events);
    at += events.length;
  }
  return { ok: true, state };
}
