import { describe, expect, it } from 'vitest';
import { CALLER_ORIGIN } from '../../../src/reducers/rune-origin.js';
import { lastValueFrom, take, toArray } from 'rxjs';
import { chatActor, memoryStore, type Rune, type RuneStore } from '../../../src/index.js';
import { engineReads } from '../../../src/streams/engine/reads.js';
import type { DispatchResult } from '../../../src/streams/engine.js';
import type { DispatchSink } from '../../../src/streams/submit.js';
import { engineParts } from '../../support/engine-parts.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const machines = { [chatActor.id]: chatActor };
const ping = { type: 'ProcessInteraction', userId };
const done = { type: 'InteractionComplete', success: true };
const ignore: DispatchSink<null> = { result: (_: DispatchResult) => {}, error: () => {} };

/** The runes of a chat actor `count` long: a spawn, then pings and completions in turn. */
function chatRunes(stream: string, count: number): Rune[] {
  const runes: Rune[] = [{ stream, seq: 1, machine: chatActor.id, kind: 'spawned', event: { type: 'spawn' }, to: 'idle', at: 1 }];
  for (let seq = 2; seq <= count; seq++) runes.push({ stream, seq, machine: chatActor.id, kind: 'x', event: seq % 2 === 0 ? ping : done, at: seq });
  return runes;
}

/** The reads of an engine's parts on `store`, with every page read counted. */
function readsOn(store: RuneStore, archived = false) {
  const parts = engineParts(store, machines);
  const pages: Array<[number, number]> = [];
  const reads = engineReads({
    ...parts,
    machines,
    read: (stream, afterSeq, limit) => (pages.push([afterSeq, limit]), store.read(stream, afterSeq, limit)),
    archived,
  });
  return { ...parts, reads, pages };
}

describe('engineReads', () => {
  it('state$: the current durable state, then each one once, in order; one published while the stream loads is not missed', async () => {
    const store = memoryStore();
    await store.append(chatRunes('a', 3));
    const { homes, reads } = readsOn(store);
    const values = (states: unknown[]) => states.map((s) => (s as { value: string }).value);
    const early: unknown[] = [];
    reads.state$('a').subscribe((state) => early.push(state));
    // Dispatched while the subscription's load is in progress: applied as the load ends, before
    // the subscriber is told what the load found, which is then older and skipped.
    homes.enter('a', ping, 10, CALLER_ORIGIN, ignore, null);
    await homes.settled();
    await Promise.resolve();
    expect(values(early)).toEqual(['running']);
    const late: unknown[] = [];
    reads.state$('a').subscribe((state) => late.push(state)); // in memory: its current state at once
    homes.enter('a', done, 11, CALLER_ORIGIN, ignore, null);
    expect(values(early)).toEqual(['running', 'idle']);
    expect(values(late)).toEqual(['running', 'idle']);
  });

  it('state$ errors with unknown_stream for a stream the store does not have; snapshot gives undefined', async () => {
    const { reads } = readsOn(memoryStore());
    await expect(lastValueFrom(reads.state$('nobody'))).rejects.toMatchObject({ code: 'unknown_stream' });
    expect(await reads.snapshot('nobody')).toBeUndefined();
  });

  it('runes$: the stored runes after a seq, then the live ones, without gap or duplicate', async () => {
    const store = memoryStore();
    await store.append(chatRunes('a', 3));
    const { homes, reads } = readsOn(store);
    const seqs = lastValueFrom(reads.runes$('a', { afterSeq: 1 }).pipe(take(4), toArray()));
    homes.enter('a', ping, 10, CALLER_ORIGIN, ignore, null);
    homes.enter('a', done, 11, CALLER_ORIGIN, ignore, null);
    expect((await seqs).map((rune) => rune.seq)).toEqual([2, 3, 4, 5]);
  });

  it("stored: a short page ends a store's read without asking again; through an archive the read goes on until a page is empty", async () => {
    const store = memoryStore();
    await store.append(chatRunes('a', 1500));
    const direct = readsOn(store);
    expect((await lastValueFrom(direct.reads.stored('a', 0).pipe(toArray()))).length).toBe(1500);
    expect(direct.pages).toEqual([
      [0, 1000],
      [1000, 1000],
    ]);
    const archived = readsOn(store, true);
    expect((await lastValueFrom(archived.reads.stored('a', 1200).pipe(toArray()))).map((rune) => rune.seq)).toEqual(
      chatRunes('a', 1500)
        .slice(1200)
        .map((rune) => rune.seq),
    );
    expect(archived.pages).toEqual([
      [1200, 1000],
      [1500, 1000],
    ]);
  });
});
