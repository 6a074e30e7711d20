import { firstValueFrom, from } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { KEPT_TURN_HISTORIES, turnRunes$ } from '../../../src/effects/agent/turn-history.js';
import type { Rune } from '../../../src/reducers/rune.js';
import type { EpicContext } from '../../../src/streams/epic.js';

const STREAM = 'conv/c1/agent/a/turn';

/** A turn stream's rune of `event` at `seq`. */
const rune = (seq: number, event: Rune['event'], stream = STREAM): Rune => ({ stream, seq, machine: 'turn-engine', kind: String(event.type), event, at: seq * 10 });

/** A context over a log it can grow, recording each read's `afterSeq`. */
function loggedContext(log: Rune[]) {
  const reads: { stream: string; afterSeq: number }[] = [];
  const context = {
    read: (stream: string, afterSeq = 0) => {
      reads.push({ stream, afterSeq });
      return from(log.filter((r) => r.stream === stream && r.seq > afterSeq));
    },
  } as unknown as EpicContext;
  return { context, reads };
}

describe('turnRunes$: a turn stream read once, then only what came after', () => {
  it('reads the whole stream first, then from the last seq it read, with the same runes as a whole read', async () => {
    const log = [rune(1, { type: 'spawn' }), rune(2, { type: 'start_turn', input: 'hi' }), rune(3, { type: 'assistant_delta', content: 'He' })];
    const { context, reads } = loggedContext(log);
    await firstValueFrom(turnRunes$(STREAM, context));
    log.push(rune(4, { type: 'assistant_delta', content: 'llo' }), rune(5, { type: 'response_done' }), rune(6, { type: 'start_turn', input: 'again' }));
    const runes = await firstValueFrom(turnRunes$(STREAM, context));
    expect(reads).toEqual([
      { stream: STREAM, afterSeq: 0 },
      { stream: STREAM, afterSeq: 3 },
    ]);
    // The deltas in a row are one rune with their text, the seq and time of the last.
    expect(runes.map((r) => [r.seq, r.event])).toEqual([
      [1, { type: 'spawn' }],
      [2, { type: 'start_turn', input: 'hi' }],
      [4, { type: 'assistant_delta', content: 'Hello' }],
      [5, { type: 'response_done' }],
      [6, { type: 'start_turn', input: 'again' }],
    ]);
    expect(runes[2]).toMatchObject({ at: 40, payload: { content: 'Hello' } });
  });

  it('keeps a history per engine: another context reads its own store whole', async () => {
    const first = loggedContext([rune(1, { type: 'spawn' }), rune(2, { type: 'start_turn', input: 'one' })]);
    const second = loggedContext([rune(1, { type: 'spawn' }), rune(2, { type: 'start_turn', input: 'two' })]);
    await firstValueFrom(turnRunes$(STREAM, first.context));
    const runes = await firstValueFrom(turnRunes$(STREAM, second.context));
    expect(second.reads).toEqual([{ stream: STREAM, afterSeq: 0 }]);
    expect(runes.at(-1)?.event).toEqual({ type: 'start_turn', input: 'two' });
  });

  it('a history handed out does not grow with a later read', async () => {
    const log = [rune(1, { type: 'spawn' }), rune(2, { type: 'start_turn', input: 'hi' })];
    const { context } = loggedContext(log);
    const before = await firstValueFrom(turnRunes$(STREAM, context));
    log.push(rune(3, { type: 'response_done' }));
    await firstValueFrom(turnRunes$(STREAM, context));
    expect(before.map((r) => r.seq)).toEqual([1, 2]);
  });

  it(`keeps the ${KEPT_TURN_HISTORIES} streams read last: the least recent is read whole again`, async () => {
    const streams = Array.from({ length: KEPT_TURN_HISTORIES + 1 }, (_, i) => `conv/c${i}/agent/a/turn`);
    const { context, reads } = loggedContext(streams.map((stream) => rune(1, { type: 'spawn' }, stream)));
    for (const stream of streams) await firstValueFrom(turnRunes$(stream, context));
    await firstValueFrom(turnRunes$(streams.at(-1)!, context));
    await firstValueFrom(turnRunes$(streams[0]!, context));
    expect(reads.slice(-2)).toEqual([
      { stream: streams.at(-1), afterSeq: 1 },
      { stream: streams[0], afterSeq: 0 },
    ]);
  });
});
