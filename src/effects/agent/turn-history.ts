import { defer, map, toArray, type Observable } from 'rxjs';
import type { RuneOf } from '../../reducers/rune.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';

type TurnRune = RuneOf<typeof turnEngine>;

/** A turn stream's history as read so far: its runes up to `seq`, deltas in a row as one. */
interface History {
  readonly seq: number;
  readonly runes: readonly TurnRune[];
}

/**
 * How many runes an engine keeps of the turn histories it read last (deltas in a row counted as
 * one), the least recently read history dropped first: the agents talking now. One dropped is read
 * whole again the next time, as before there was a cache.
 */
export const KEPT_TURN_RUNES = 100_000;

/**
 * Per engine, the histories it keeps, least recently read first, and their runes: keyed by the
 * context's `read`, so a context made from another (`Object.create`, a call's own) shares them.
 */
const kept = new WeakMap<EpicContext['read'], { histories: Map<string, History>; runes: number }>();

/** A delta carrying `content`, in the place (seq, time) of `rune`, the last delta of a run. */
const joinedDelta = (rune: TurnRune, content: string): TurnRune => ({ ...rune, event: { type: 'assistant_delta', content }, payload: { content } }) as TurnRune;

/** `history` then `fresh` (every seq above its own), each run of deltas joined into one. */
function extended(history: History, fresh: readonly TurnRune[]): History {
  const runes = [...history.runes];
  let { seq } = history;
  // The run of deltas at the end of `runes`: its texts, joined once when the run ends (not a copy per delta).
  let run: { texts: string[]; last: TurnRune } | undefined;
  const endRun = (): void => {
    if (run !== undefined && run.texts.length > 1) runes[runes.length - 1] = joinedDelta(run.last, run.texts.join(''));
    run = undefined;
  };
  for (const rune of fresh) {
    if (rune.seq <= seq) continue;
    seq = rune.seq;
    if (rune.event.type !== 'assistant_delta') {
      endRun();
      runes.push(rune);
      continue;
    }
    const previous = runes.at(-1);
    if (run !== undefined) run.texts.push(rune.event.content);
    else if (previous?.event.type === 'assistant_delta') run = { texts: [previous.event.content, rune.event.content], last: rune };
    else {
      runes.push(rune);
      run = { texts: [rune.event.content], last: rune };
      continue;
    }
    run.last = rune;
  }
  endRun();
  return { seq, runes };
}

/**
 * A turn stream's stored runes, in seq order, with each run of `turn.assistant_delta`s as one
 * rune carrying their text (the seq and time of its last): what a model call's transcript, a
 * turn's start and its tool rounds are read from. Each engine keeps the histories it read last, up
 * to {@link KEPT_TURN_RUNES} runes, so a call reads only what was stored since the last read (a
 * model call per round of a long conversation read all of it, from the store, every time: the
 * square of its length, and on SQLite every rune's hash checked again).
 */
export function turnRunes$(stream: string, context: EpicContext): Observable<readonly TurnRune[]> {
  return defer(() => {
    let cache = kept.get(context.read);
    if (cache === undefined) kept.set(context.read, (cache = { histories: new Map(), runes: 0 }));
    const { histories } = cache;
    const before = histories.get(stream) ?? { seq: 0, runes: [] };
    return context.read(stream, before.seq).pipe(
      ofMachine(turnEngine),
      toArray(),
      map((fresh) => {
        // A read that ended meanwhile may have taken the history further: build on the longer.
        const now = histories.get(stream);
        const history = extended(now !== undefined && now.seq > before.seq ? now : before, fresh);
        cache.runes += history.runes.length - (now?.runes.length ?? 0);
        histories.delete(stream);
        histories.set(stream, history);
        for (const [oldest, dropped] of histories) {
          if (cache.runes <= KEPT_TURN_RUNES || oldest === stream) break;
          histories.delete(oldest);
          cache.runes -= dropped.runes.length;
        }
        return history.runes;
      }),
    );
  });
}
