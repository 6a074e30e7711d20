import { filter, firstValueFrom, from } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { KEPT_TURN_RUNES, turnRunes$ } from '../../../src/effects/agent/turn-history.js';
import { agentEpics, scriptedModel } from '../../../src/agents.js';
import { agentStreams, createEngine, memoryStore, type RuneStore, type TurnEngineState } from '../../../src/index.js';
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

  it('joins each run of deltas, within a read and across reads, and keeps a single delta as it is', async () => {
    const delta = (seq: number, content: string) => rune(seq, { type: 'assistant_delta', content });
    const log = [rune(1, { type: 'start_turn', input: 'q' }), delta(2, 'a'), delta(3, 'b'), delta(4, 'c'), rune(5, { type: 'response_done' })];
    log.push(rune(6, { type: 'start_turn', input: 'r' }), delta(7, 'd'), rune(8, { type: 'response_done' }), rune(9, { type: 'start_turn', input: 's' }), delta(10, 'e'));
    const { context } = loggedContext(log);
    await firstValueFrom(turnRunes$(STREAM, context));
    log.push(delta(11, 'f'), delta(12, 'g'));
    const runes = await firstValueFrom(turnRunes$(STREAM, context));
    expect(runes.map((r) => `${r.seq}:${r.event.type === 'assistant_delta' ? r.event.content : r.event.type}`)).toEqual([
      '1:start_turn',
      '4:abc',
      '5:response_done',
      '6:start_turn',
      '7:d',
      '8:response_done',
      '9:start_turn',
      '12:efg',
    ]);
    expect(runes[4]).toBe(log[6]); // a lone delta is the stored rune itself
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

  it(`keeps the histories read last up to ${KEPT_TURN_RUNES} runes: the least recently read is read whole again`, async () => {
    const streams = ['conv/c1/agent/a/turn', 'conv/c2/agent/a/turn', 'conv/c3/agent/a/turn'];
    const each = Math.ceil(KEPT_TURN_RUNES / 2.5); // two fit, three do not
    const log = streams.flatMap((stream) => Array.from({ length: each }, (_, i) => rune(i + 1, { type: 'start_turn', input: `${i}` }, stream)));
    const { context, reads } = loggedContext(log);
    for (const stream of streams) await firstValueFrom(turnRunes$(stream, context));
    await firstValueFrom(turnRunes$(streams[2]!, context));
    await firstValueFrom(turnRunes$(streams[1]!, context));
    await firstValueFrom(turnRunes$(streams[0]!, context));
    expect(reads.slice(-3)).toEqual([
      { stream: streams[2], afterSeq: each },
      { stream: streams[1], afterSeq: each },
      { stream: streams[0], afterSeq: 0 },
    ]);
  });

  it("an engine's agents read a turn stream whole once: each later model call and turn end reads only what came after", async () => {
    const store = memoryStore();
    const reads: number[] = [];
    const a = agentStreams('conv/c1', 'a1');
    const counting: RuneStore = { ...store, read: (stream, afterSeq, limit) => (stream === a.turn && reads.push(afterSeq ?? 0), store.read(stream, afterSeq, limit)) };
    const engine = createEngine({ store: counting, epics: agentEpics({ model: scriptedModel([{ text: 'one' }, { text: 'two' }, { text: 'three' }]) }) });
    try {
      await engine.spawn(a.turn, 'turn-engine');
      for (let turn = 1; turn <= 3; turn++) {
        const done = firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === turn)));
        await engine.dispatch(a.turn, { type: 'start_turn', input: `q${turn}` });
        await done;
      }
      expect(reads.length).toBeGreaterThanOrEqual(3);
      expect(reads.filter((afterSeq) => afterSeq === 0)).toHaveLength(1);
    } finally {
      await engine.close();
    }
  });
});
