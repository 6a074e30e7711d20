import { describe, expect, it } from 'vitest';
import { CALLER_ORIGIN } from '../../src/reducers/rune-origin.js';
import { chatActor, StreamReadError, type Rune } from '../../src/index.js';
import { memoryStore, type RuneStore } from '../../src/index.js';
import type { Homes } from '../../src/streams/engine/homes.js';
import { engineParts } from '../support/engine-parts.js';
import { spawnedInstance, type Instance } from '../../src/streams/engine/instance.js';
import type { DispatchSink } from '../../src/streams/submit.js';
import type { DispatchResult } from '../../src/streams/engine.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const machines = { [chatActor.id]: chatActor };

/** The runes of a chat actor going idle -> running -> idle -> running ..., `count` of them from the spawn. */
function chatRunes(stream: string, count: number): Rune[] {
  const runes: Rune[] = [{ stream, seq: 1, machine: chatActor.id, kind: 'spawned', event: { type: 'spawn' }, to: 'idle', at: 1 }];
  for (let seq = 2; seq <= count; seq++) {
    const event = seq % 2 === 0 ? { type: 'ProcessInteraction', userId } : { type: 'InteractionComplete', success: true };
    runes.push({ stream, seq, machine: chatActor.id, kind: event.type, event, at: seq });
  }
  return runes;
}

const foldOf = (runes: readonly Rune[]) => runes.slice(1).reduce((s, r) => chatActor.transition(s, r.event as never), chatActor.initial());

/** An instance of a fresh spawn, as the engine builds it. */
const spawned = (stream: string): Instance => spawnedInstance(stream, chatActor, chatActor.initial(), 0);

const homesOn = (store: RuneStore): Homes => engineParts(store, machines).homes;

/** A sink logging each outcome into `log` as `token: seq` or `token: code`. */
const loggingSink = (log: string[]): DispatchSink<string> => ({
  result: (result: DispatchResult, token) => log.push(`${token}: ${result.accepted ? result.rune.seq : result.code}`),
  error: (error, token) => log.push(`${token} failed: ${(error as Error).message}`),
});
const ping = { type: 'ProcessInteraction', userId };
const done = { type: 'InteractionComplete', success: true };

/** Lets `n` microtasks run. */
async function microtasks(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await Promise.resolve();
}

describe('Homes: loading', () => {
  it('gives an instance in memory at once, and hydrates one that is not, once for concurrent loads', async () => {
    const inner = memoryStore();
    await inner.append(chatRunes('a', 5));
    let heads = 0;
    const store: RuneStore = { ...inner, head: (stream) => (heads++, inner.head(stream)) };
    const instances = homesOn(store);
    const first = instances.load('a');
    const second = instances.load('a');
    expect(first).toBeInstanceOf(Promise);
    expect(second).toBe(first);
    const instance = (await first)!;
    expect(heads).toBe(1);
    expect(instance).toMatchObject({ stream: 'a', seq: 5, durableSeq: 5, at: 5, sinceSnapshot: 5, releasing: false });
    expect(instance.state).toEqual(foldOf(chatRunes('a', 5)));
    expect(instance.durableState).toBe(instance.state);
    expect(instances.load('a')).toBe(instance);
    expect(instances.size).toBe(1);
    expect(await instances.load('nobody')).toBeUndefined();
  });

  it('hydrates from the newest snapshot, folding only the events after it', async () => {
    const inner = memoryStore();
    const runes = chatRunes('a', 9);
    await inner.append(runes);
    await inner.saveSnapshot({ stream: 'a', seq: 6, state: foldOf(runes.slice(0, 6)) });
    const reads: number[] = [];
    const store: RuneStore = { ...inner, readEvents: (stream, after, limit) => (reads.push(after ?? 0), inner.readEvents(stream, after, limit)) };
    const instance = (await homesOn(store).load('a'))!;
    expect(reads).toEqual([6]);
    expect(instance).toMatchObject({ seq: 9, sinceSnapshot: 3 });
    expect(instance.state).toEqual(foldOf(runes));
  });

  it('folds up to the head it read, not the runes another writer appends meanwhile', async () => {
    const inner = memoryStore();
    await inner.append(chatRunes('a', 3));
    // Another writer appends a:4 right after this load read the head.
    const store: RuneStore = {
      ...inner,
      head: async (stream) => {
        const head = await inner.head(stream);
        await inner.append(chatRunes('a', 4).slice(3));
        return head;
      },
    };
    const instance = (await homesOn(store).load('a'))!;
    expect(instance.seq).toBe(3);
    expect(instance.state).toEqual(foldOf(chatRunes('a', 3)));
  });

  it("folds on top the runes another writer commits while it loads, as the store's tail tells them", async () => {
    const inner = memoryStore();
    await inner.append(chatRunes('a', 3));
    let goOn!: () => void;
    const held = new Promise<void>((resolve) => (goOn = resolve));
    const store: RuneStore = {
      ...inner,
      head: async (stream) => {
        const head = await inner.head(stream);
        await held;
        return head;
      },
    };
    const instances = homesOn(store);
    const [a3, a4, a5] = chatRunes('a', 5).slice(2);
    const loading = instances.load('a');
    await inner.append([a4!, a5!]); // another writer, after the head was read
    instances.heard(a3!); // one the load reads anyway
    instances.heard(a4!);
    instances.heard(a5!);
    goOn();
    const instance = (await loading)!;
    expect(instance).toMatchObject({ seq: 5, durableSeq: 5, at: 5 });
    expect(instance.state).toEqual(foldOf(chatRunes('a', 5)));
  });

  it('refuses a log that ends before its head (log_mismatch) and a machine it does not host (unknown_machine)', async () => {
    const inner = memoryStore();
    await inner.append([...chatRunes('a', 2), { stream: 'x', seq: 1, machine: 'alien', kind: 'spawned', event: { type: 'spawn' }, at: 0 }]);
    const store: RuneStore = {
      ...inner,
      head: async (stream) => {
        const head = await inner.head(stream);
        return head && { ...head, seq: head.seq + 1 };
      },
    };
    const instances = homesOn(store);
    await expect(instances.load('a')).rejects.toMatchObject({ code: 'log_mismatch', message: `stream "a": the store's head is seq 3 but its runes end at 2` });
    await expect(instances.load('x')).rejects.toBeInstanceOf(StreamReadError);
    await expect(instances.load('x')).rejects.toMatchObject({ code: 'unknown_machine' });
    expect(instances.size).toBe(0);
  });
});

describe('Homes: a spawn claims its stream', () => {
  it('puts the instance in memory in the same step as its spawn rune is admitted: no load sees it before, whatever microtask it comes in', async () => {
    for (let delay = 0; delay <= 12; delay++) {
      const instances = homesOn(memoryStore());
      const admitted = new Set<Instance>();
      const seen: Array<Instance | undefined> = [];
      const claim = instances.claim(
        's',
        () => spawned('s'),
        (instance) => {
          expect(instances.get('s')).toBe(instance); // in memory already when its rune is queued
          admitted.add(instance);
        },
      );
      // Loads at every microtask delay: some find the claim in progress, some the instance.
      const loads: Promise<void>[] = [];
      for (let d = 0; d <= delay; d++) {
        loads.push(
          microtasks(d).then(async () => {
            const loaded = instances.load('s');
            const instance = loaded instanceof Promise ? await loaded : loaded;
            expect(instance === undefined || admitted.has(instance)).toBe(true);
            seen.push(instance);
          }),
        );
      }
      const instance = await claim;
      await Promise.all(loads);
      expect(admitted.has(instance!)).toBe(true);
      expect(seen.every((s) => s === instance)).toBe(true);
    }
  });

  it('makes loads wait while the store is asked, and hydrates instead of creating when the store has the stream', async () => {
    const inner = memoryStore();
    await inner.append(chatRunes('a', 3));
    let answer!: () => void;
    const asked = new Promise<void>((resolve) => (answer = resolve));
    const store: RuneStore = { ...inner, head: async (stream) => (await asked, inner.head(stream)) };
    const instances = homesOn(store);
    let created = 0;
    const claim = instances.claim(
      'a',
      () => (created++, spawned('a')),
      () => {},
    );
    const loaded = instances.load('a');
    expect(loaded).toBe(claim); // the load waits for the claim
    answer();
    const instance = await claim;
    expect(created).toBe(0);
    expect(instance).toMatchObject({ seq: 3 });
    expect(await loaded).toBe(instance);
  });

  it('takes its claim at once while a load is in progress: a load after the claim waits for the claim, not for the load that finds nothing', async () => {
    const inner = memoryStore();
    let answer!: () => void;
    const asked = new Promise<void>((resolve) => (answer = resolve));
    const store: RuneStore = { ...inner, head: async (stream) => (await asked, inner.head(stream)) };
    const instances = homesOn(store);
    const early = instances.load('a'); // a dispatch or subscription that came first
    const claim = instances.claim(
      'a',
      () => spawned('a'),
      () => {},
    );
    const later = instances.load('a'); // a dispatch made right after the spawn
    expect(later).toBe(claim);
    answer();
    expect(await early).toBeUndefined();
    const instance = await claim;
    expect(instance).toMatchObject({ stream: 'a', seq: 1 });
    expect(await later).toBe(instance);
    // The early load's end does not drop the claim's place: the instance is in memory, no load is left.
    expect(instances.load('a')).toBe(instance);
  });
});

describe('Homes: leaving memory', () => {
  it('releases an instance at once when every rune is durable, else marks it to leave once they are', async () => {
    const instances = homesOn(memoryStore());
    await instances.claim(
      'a',
      () => spawned('a'),
      () => {},
    );
    const a = instances.get('a')!;
    instances.release('a');
    expect(a.releasing).toBe(true); // its spawn is not durable yet
    expect(instances.get('a')).toBe(a);
    a.durableSeq = 1;
    instances.release('a');
    expect(instances.get('a')).toBeUndefined();
    expect(instances.isCurrent(a)).toBe(false);
  });

  it('forgets an instance at once, and settles once every load has', async () => {
    const inner = memoryStore();
    await inner.append(chatRunes('a', 2));
    const instances = homesOn(inner);
    const loading = instances.load('a');
    const failing = homesOn({ ...inner, head: async () => Promise.reject(new Error('gone')) });
    const failed = failing.load('a') as Promise<unknown>;
    failed.catch(() => {});
    await instances.settled();
    await failing.settled();
    expect(await loading).toBe(instances.get('a'));
    instances.forget('a');
    expect(instances.size).toBe(0);
  });
});

describe("Homes: events wait in their stream's home", () => {
  it('applies the events dispatched while a stream loads in the order they came, with any dispatched meanwhile (from inside an outcome) behind them', async () => {
    const store = memoryStore();
    await store.append(chatRunes('a', 3)); // idle -> running -> idle: a ping is next
    const homes = homesOn(store);
    const log: string[] = [];
    const sink = loggingSink(log);
    // The first outcome dispatches again at once, as a subscriber answering a rune would.
    const answering: DispatchSink<string> = {
      result: (result, token) => {
        sink.result(result, token);
        homes.enter('a', ping, 0, CALLER_ORIGIN, sink, 'answer');
      },
      error: sink.error,
    };
    homes.enter('a', ping, 0, CALLER_ORIGIN, answering, 'first');
    homes.enter('a', done, 0, CALLER_ORIGIN, sink, 'second');
    expect(log).toEqual([]); // loading: nothing applied yet
    await homes.load('a');
    await microtasks(2);
    expect(log).toEqual(['first: 4', 'second: 5', 'answer: 6']);
    expect(homes.get('a')).toMatchObject({ seq: 6, durableSeq: 6 });
  });

  it('answers the events dispatched before a spawn by what the load in progress found, and applies those after it to the new instance', async () => {
    const inner = memoryStore();
    let answer!: () => void;
    const asked = new Promise<void>((resolve) => (answer = resolve));
    const store: RuneStore = { ...inner, head: async (stream) => (await asked, inner.head(stream)) };
    const homes = homesOn(store);
    const log: string[] = [];
    homes.enter('a', ping, 0, CALLER_ORIGIN, loggingSink(log), 'before');
    // Its spawn rune made durable at once, as the commit queue does with the memory store.
    const admit = (instance: Instance): void => {
      inner.appendSync!(chatRunes('a', 1)[0]!);
      instance.durableSeq = 1;
      instance.durableState = instance.state;
    };
    const claim = homes.claim('a', () => spawned('a'), admit);
    homes.enter('a', ping, 0, CALLER_ORIGIN, loggingSink(log), 'after');
    answer();
    await claim;
    await microtasks(2);
    expect(log).toEqual(['before: unknown_stream', 'after: 2']);
  });

  it('refuses the events waiting for a load that failed, and those of a closed engine', async () => {
    const inner = memoryStore();
    await inner.append(chatRunes('a', 2));
    const failing = homesOn({ ...inner, head: async () => Promise.reject(new Error('gone')) });
    const log: string[] = [];
    failing.enter('a', ping, 0, CALLER_ORIGIN, loggingSink(log), 'one');
    await failing.settled();
    await microtasks(2);
    expect(log).toEqual(['one failed: gone']);
    const homes = homesOn(inner);
    homes.enter('a', ping, 0, CALLER_ORIGIN, loggingSink(log), 'two');
    homes.close();
    await homes.settled();
    await microtasks(2);
    expect(log).toEqual(['one failed: gone', 'two: closed']);
  });
});
