import { Subject, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { StreamReadError, createEngine, memoryStore, type Rune, type RuneStore } from '../../src/index.js';
import { replayThenLive } from '../../src/streams/replay-then-live.js';

/** The error an Observable or promise failed with, for asserting its class, code and message. */
const failureOf = (settled: Promise<unknown>): Promise<unknown> =>
  settled.then(
    () => {
      throw new Error('expected a failure');
    },
    (error: unknown) => error,
  );

const spawnRune = (stream: string, machine: string): Rune => ({ stream, seq: 1, machine, kind: 'spawned', event: { type: 'spawn' }, at: 0 });

describe('StreamReadError: the stable codes of reading a stream', () => {
  it('unknown_stream: state$ of a stream never spawned', async () => {
    const engine = createEngine();
    const error = await failureOf(firstValueFrom(engine.state$('nobody')));
    expect(error).toBeInstanceOf(StreamReadError);
    expect(error).toMatchObject({ name: 'StreamReadError', code: 'unknown_stream', message: 'unknown stream "nobody"' });
    await engine.close();
  });

  it('unknown_machine: state$ of a stored stream whose machine this engine does not host; a dispatch still answers a result', async () => {
    const store = memoryStore();
    await store.append([spawnRune('old', 'retired-machine')]);
    const engine = createEngine({ store });
    expect(await failureOf(firstValueFrom(engine.state$('old')))).toMatchObject({
      code: 'unknown_machine',
      message: 'stream "old" was spawned as machine "retired-machine", which this engine does not host',
    });
    expect(await engine.dispatch('old', { type: 'Ping' })).toMatchObject({ accepted: false, code: 'unknown_machine' });
    await engine.close();
  });

  it('runes_missing: a replay whose next stored rune skips ahead', async () => {
    const runes = replayThenLive({ stream: 's', afterSeq: 0, read: async (after) => (after === 0 ? [{ ...spawnRune('s', 'm'), seq: 5 }] : []), live$: new Subject<Rune>() });
    expect(await failureOf(firstValueFrom(runes))).toMatchObject({
      name: 'StreamReadError',
      code: 'runes_missing',
      message: 'stream "s": runes 1..4 were not in the store when read, nor heard live (pruned by retention, or written by another process)',
    });
  });

  it('log_mismatch: hydrating a stream whose store head is past its runes, for state$ and for a dispatch', async () => {
    const inner = memoryStore();
    await inner.append([spawnRune('s', 'chat-actor')]);
    // A store that claims one rune more than it can read: a head and a log that disagree.
    const store: RuneStore = {
      ...inner,
      head: async (stream) => {
        const head = await inner.head(stream);
        return head && { ...head, seq: head.seq + 1 };
      },
    };
    const engine = createEngine({ store });
    const expected = { code: 'log_mismatch', message: `stream "s": the store's head is seq 2 but its runes end at 1` };
    expect(await failureOf(firstValueFrom(engine.state$('s')))).toMatchObject(expected);
    const dispatched = await failureOf(engine.dispatch('s', { type: 'Ping' }));
    expect(dispatched).toBeInstanceOf(StreamReadError);
    expect(dispatched).toMatchObject(expected);
    await engine.close();
  });
});

describe('dispatch of a stream id that is not a non-empty string', () => {
  it('answers invalid_stream, like spawn, and stores nothing', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    const invalid = { accepted: false, code: 'invalid_stream', reason: 'a stream id must be a non-empty string, got ""' };
    expect(await engine.dispatch('', { type: 'Ping' })).toEqual(invalid);
    expect(await engine.spawn('', 'chat-actor')).toEqual(invalid);
    expect(await engine.dispatch(7 as unknown as string, { type: 'Ping' })).toEqual({ ...invalid, reason: 'a stream id must be a non-empty string, got number' });
    expect(await store.head('')).toBeUndefined();
    await engine.close();
  });
});
