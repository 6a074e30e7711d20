import { Subject, firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { replayThenLive } from '../../src/streams/replay-then-live.js';

const rune = (seq: number): Rune => ({ stream: 's', seq, machine: 'm', kind: 'k', event: { type: 'k' }, at: seq });

describe('replayThenLive', () => {
  it('emits each seq once and in order when a live rune is also read from the store', async () => {
    const live$ = new Subject<Rune>();
    const stored = [1, 2, 3, 4].map(rune);
    // Runes 4 and 5 become durable while the replay is reading: 4 is read and also heard live.
    const read = async (after: number, limit: number) => {
      if (after === 0) {
        live$.next(rune(4));
        live$.next(rune(5));
      }
      return stored.filter((r) => r.seq > after).slice(0, limit);
    };
    const seen = firstValueFrom(replayThenLive({ stream: 's', afterSeq: 0, read, live$, pageSize: 2 }).pipe(take(6), toArray()));
    await Promise.resolve();
    await new Promise((r) => setImmediate(r));
    live$.next(rune(6));
    expect((await seen).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('errors, naming the missing seqs, when the stored runes start after a pruned gap', async () => {
    const runes = replayThenLive({ stream: 's', afterSeq: 0, read: async (after) => (after === 0 ? [rune(5)] : []), live$: new Subject<Rune>() });
    await expect(firstValueFrom(runes)).rejects.toThrow(
      'stream "s": runes 1..4 were not in the store when read, nor heard live (pruned by retention, or written by another process)',
    );
  });

  it('completes when the live runes complete (the engine closed)', async () => {
    const live$ = new Subject<Rune>();
    const all = firstValueFrom(replayThenLive({ stream: 's', afterSeq: 0, read: async () => [], live$ }).pipe(toArray()));
    await new Promise((r) => setImmediate(r));
    live$.next(rune(1));
    live$.complete();
    expect((await all).map((r) => r.seq)).toEqual([1]);
  });

  it('finishes the replay, and the runes heard live meanwhile, when the live runes complete during it', async () => {
    const live$ = new Subject<Rune>();
    const stored = [1, 2, 3].map(rune);
    const read = async (after: number, limit: number) => {
      if (after === 0) {
        live$.next(rune(4)); // durable while the replay reads, then the engine closes
        live$.complete();
      }
      return stored.filter((r) => r.seq > after).slice(0, limit);
    };
    const all = await firstValueFrom(replayThenLive({ stream: 's', afterSeq: 0, read, live$, pageSize: 2 }).pipe(toArray()));
    expect(all.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
  });

  it('completes, rather than erroring, when a read fails after the live runes completed (the engine closed, its store with it)', async () => {
    const live$ = new Subject<Rune>();
    const read = async (after: number) => {
      if (after === 0) return [rune(1)];
      live$.complete();
      throw Object.assign(new Error('the store is closed'), { code: 'closed' });
    };
    const all = await firstValueFrom(replayThenLive({ stream: 's', afterSeq: 0, read, live$ }).pipe(toArray()));
    expect(all.map((r) => r.seq)).toEqual([1]);
  });

  it('errors when a read fails while the live runes go on', async () => {
    const read = async () => {
      throw new Error('disk I/O error');
    };
    await expect(firstValueFrom(replayThenLive({ stream: 's', afterSeq: 0, read, live$: new Subject<Rune>() }))).rejects.toThrow('disk I/O error');
  });
});
