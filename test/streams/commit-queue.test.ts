import { describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { CommitQueue, type CommitHooks, type CommitQueueOptions, type Committable } from '../../src/streams/commit-queue.js';
import { memoryStore, StoreError, type RuneStore } from '../../src/index.js';
import type { DispatchSink } from '../../src/streams/submit.js';
import { runeOf } from '../../src/store-kit.js';
import { heldStore } from '../support/held-store.js';

const id = (rune: Rune): string => `${rune.stream}:${rune.seq}`;

/** An instance as the queue sees it: its stream and where its durable runes end. */
const instanceOf = (stream: string, durableSeq = 0): Committable => ({ stream, durableSeq, durableState: undefined });

/**
 * A memory store that logs every write into `log`; with `sync`, it commits at once (`appendSync`),
 * else only in batches. Its batches can be held, and fail once with a given error.
 */
const loggingStore = (log: string[], { sync }: { sync: boolean }) =>
  heldStore(memoryStore(), { sync, onWrite: (write, runes) => log.push(`${write} ${runes.map(id).join(' ')}`) });

/** A queue on `store` whose hooks and sink log into `log`; `published` can be extended. */
function queueOn(store: RuneStore, log: string[], hooks: Partial<CommitHooks<Committable>> = {}, options?: CommitQueueOptions) {
  const queue = new CommitQueue<Committable>(
    store,
    {
      published: (instance, rune) => {
        log.push(`published ${id(rune)}`);
        expect(instance.durableSeq).toBe(rune.seq); // the queue moved it before telling anyone
      },
      refused: (stream) => log.push(`refused ${stream}`),
      lost: (stream, runes) => log.push(`lost ${stream}: ${runes.map((p) => p.token).join(' ')}`),
      committed: () => undefined,
      ...hooks,
    },
    options,
  );
  const sink: DispatchSink<string> = {
    result: (result, token) => log.push(`${token} ${result.accepted ? 'accepted' : 'refused'}`),
    error: (error, token) => log.push(`${token} failed: ${(error as Error).message}`),
  };
  const settled = async (): Promise<void> => {
    while (queue.flushing !== undefined) await queue.flushing;
  };
  return { queue, sink, settled };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('CommitQueue: publish after commit', () => {
  it('with a store that commits at once: appended, then published, then accepted, before enqueue returns', () => {
    const log: string[] = [];
    const { store } = loggingStore(log, { sync: true });
    const { queue, sink } = queueOn(store, log);
    const a = instanceOf('a');
    queue.enqueue(a, runeOf('a', 1), { n: 1 }, sink, 'a:1');
    expect(log).toEqual(['appendSync a:1', 'published a:1', 'a:1 accepted']);
    expect(a).toEqual({ stream: 'a', durableSeq: 1, durableState: { n: 1 } });
  });

  it('with a store that batches: nothing is published, and no durable seq moves, until the append resolved', async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: false });
    const { queue, sink, settled } = queueOn(recorder.store, log);
    const a = instanceOf('a');
    const release = recorder.hold();
    queue.enqueue(a, runeOf('a', 1), { n: 1 }, sink, 'a:1');
    await turn();
    await turn();
    expect(log).toEqual(['append a:1']);
    expect(a.durableSeq).toBe(0);
    release();
    await settled();
    expect(log).toEqual(['append a:1', 'published a:1', 'a:1 accepted']);
  });

  it('never publishes what the store refused, at once or in a batch', async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: true });
    const { queue, sink, settled } = queueOn(recorder.store, log);
    queue.enqueue(instanceOf('a', 1), runeOf('a', 2), {}, sink, 'a:2'); // the instance says a:1 is durable; the store has no a:1
    // A conflict is a lost seq race: handed to the engine with no sink told, to be applied again.
    expect(log).toEqual(['appendSync a:2', 'lost a: a:2']);

    log.length = 0;
    const batched = loggingStore(log, { sync: false });
    const other = queueOn(batched.store, log);
    batched.failNextAppend(new Error('disk full'));
    const b = instanceOf('b');
    other.queue.enqueue(b, runeOf('b', 1), {}, other.sink, 'b:1');
    await other.settled();
    expect(log).toEqual(['append b:1', 'refused b', 'b:1 failed: disk full']);
    expect(b.durableSeq).toBe(0);
    await settled();
  });
});

describe('CommitQueue: order', () => {
  it('keeps one append in flight at a time: the next batch waits for it, and each stream stays in seq order', async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: false });
    const { queue, sink, settled } = queueOn(recorder.store, log);
    const a = instanceOf('a');
    const release = recorder.hold();
    queue.enqueue(a, runeOf('a', 1), {}, sink, 'a:1');
    await turn(); // a:1's batch is in the store, held
    queue.enqueue(a, runeOf('a', 2), {}, sink, 'a:2');
    queue.enqueue(a, runeOf('a', 3), {}, sink, 'a:3');
    await turn();
    await turn();
    expect(log).toEqual(['append a:1']); // a:2 and a:3 wait for a:1's append
    release();
    await settled();
    expect(recorder.maxInFlight()).toBe(1);
    expect(log).toEqual(['append a:1', 'published a:1', 'a:1 accepted', 'append a:2 a:3', 'published a:2', 'published a:3', 'a:2 accepted', 'a:3 accepted']);
    expect((await recorder.inner.read('a')).map(id)).toEqual(['a:1', 'a:2', 'a:3']);
  });

  it('takes a rune enqueued from inside a subscriber in the next batch, never in the middle of publishing', async () => {
    const log: string[] = [];
    const { store } = loggingStore(log, { sync: true });
    const a = instanceOf('a');
    let answered = false;
    const { queue, sink, settled } = queueOn(store, log, {
      published: (instance, rune) => {
        log.push(`published ${id(rune)}`);
        if (!answered) {
          answered = true;
          queue.enqueue(a, runeOf('a', 2), {}, sink, 'a:2'); // a subscriber answering a:1
          log.push('answered');
        }
      },
    });
    queue.enqueue(a, runeOf('a', 1), {}, sink, 'a:1');
    expect(log).toEqual(['appendSync a:1', 'published a:1', 'answered', 'a:1 accepted']);
    await settled();
    expect(log.slice(4)).toEqual(['append a:2', 'published a:2', 'a:2 accepted']);
  });

  it("takes a rune enqueued while announcing runes that did not come through it (another writer's) in the next batch too", async () => {
    const log: string[] = [];
    const { store } = loggingStore(log, { sync: true });
    const { queue, sink, settled } = queueOn(store, log);
    queue.whilePublishing(() => queue.enqueue(instanceOf('a'), runeOf('a', 1), {}, sink, 'a:1'));
    expect(log).toEqual([]);
    await settled();
    expect(log).toEqual(['append a:1', 'published a:1', 'a:1 accepted']);
  });

  it("keeps a rune behind its stream's rune still waiting in a batch, even with a store that commits at once", async () => {
    const log: string[] = [];
    const { store, inner } = loggingStore(log, { sync: true });
    const a = instanceOf('a');
    const { queue, sink, settled } = queueOn(store, log, {
      published: (instance, rune) => {
        log.push(`published ${id(rune)}`);
        if (id(rune) === 'a:1') queue.enqueue(a, runeOf('a', 2), {}, sink, 'a:2'); // batched: from inside a subscriber
      },
    });
    queue.enqueue(a, runeOf('a', 1), {}, sink, 'a:1');
    queue.enqueue(a, runeOf('a', 3), {}, sink, 'a:3'); // not from a subscriber, but a:2 is still waiting
    const b = instanceOf('b');
    queue.enqueue(b, runeOf('b', 1), {}, sink, 'b:1'); // another stream: at once
    expect(log).toEqual(['appendSync a:1', 'published a:1', 'a:1 accepted', 'appendSync b:1', 'published b:1', 'b:1 accepted']);
    await settled();
    expect(log.slice(6)).toEqual(['append a:2 a:3', 'published a:2', 'published a:3', 'a:2 accepted', 'a:3 accepted']);
    expect((await inner.read('a')).map(id)).toEqual(['a:1', 'a:2', 'a:3']);
  });

  it('commits at most maxBurst runes at once in one turn; the rest of the turn goes in a batch, and the next turn starts afresh', async () => {
    const log: string[] = [];
    const { store } = loggingStore(log, { sync: true });
    const { queue, sink, settled } = queueOn(store, log, { published: () => {} }, { maxBurst: 3 });
    for (const stream of ['s1', 's2', 's3', 's4', 's5']) queue.enqueue(instanceOf(stream), runeOf(stream, 1), {}, sink, `${stream}:1`);
    expect(log.filter((line) => line.startsWith('append'))).toEqual(['appendSync s1:1', 'appendSync s2:1', 'appendSync s3:1']);
    await settled();
    expect(log.filter((line) => line.startsWith('append'))).toEqual(['appendSync s1:1', 'appendSync s2:1', 'appendSync s3:1', 'append s4:1 s5:1']);
    await turn();
    queue.enqueue(instanceOf('s6'), runeOf('s6', 1), {}, sink, 's6:1');
    expect(log.at(-2)).toBe('appendSync s6:1');
  });
});

describe('CommitQueue: a batch the store refused', () => {
  it("on a conflict, hands the conflicting stream's runes and those queued behind them to `lost`; the rest are appended again", async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: false });
    await recorder.inner.append([runeOf('a', 1), runeOf('b', 1)]);
    await recorder.inner.append([runeOf('a', 2)]); // another writer's a:2
    const { queue, sink, settled } = queueOn(recorder.store, log);
    const a = instanceOf('a', 1);
    const b = instanceOf('b', 1);
    const release = recorder.hold();
    queue.enqueue(a, runeOf('a', 2), {}, sink, 'a:2');
    queue.enqueue(b, runeOf('b', 2), {}, sink, 'b:2');
    queue.enqueue(a, runeOf('a', 3), {}, sink, 'a:3');
    await turn(); // that batch is in the store, held
    queue.enqueue(a, runeOf('a', 4), {}, sink, 'a:4');
    queue.enqueue(b, runeOf('b', 3), {}, sink, 'b:3');
    release();
    await settled();
    expect(log).toEqual([
      'append a:2 b:2 a:3',
      'lost a: a:2 a:3 a:4', // with the one queued behind a's; no sink told: the engine tries them again
      'append b:2 b:3', // b's runes again, with the one queued behind them
      'published b:2',
      'published b:3',
      'b:2 accepted',
      'b:3 accepted',
    ]);
    expect(a.durableSeq).toBe(1);
  });

  it('splits a batch the store refused for one rune, until that rune fails alone: every other rune is acknowledged', async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: false });
    // Any cause will do: this store cannot take c:1, in whatever company it comes.
    const picky: RuneStore = {
      ...recorder.store,
      append: (runes, options) => {
        if (!runes.some((r) => id(r) === 'c:1')) return recorder.store.append(runes, options);
        log.push(`refused ${runes.map(id).join(' ')}`);
        return Promise.reject(new StoreError('io_error', 'c:1 cannot be written'));
      },
    };
    const { queue, sink, settled } = queueOn(picky, log);
    const release = recorder.hold();
    for (const stream of ['a', 'b', 'c', 'd', 'e']) queue.enqueue(instanceOf(stream), runeOf(stream, 1), {}, sink, `${stream}:1`);
    await turn(); // that batch is in the store, held
    queue.enqueue(instanceOf('c'), runeOf('c', 2), {}, sink, 'c:2'); // built on c:1
    queue.enqueue(instanceOf('f'), runeOf('f', 1), {}, sink, 'f:1');
    release();
    await settled();
    expect(log.filter((line) => !line.startsWith('published'))).toEqual([
      'refused a:1 b:1 c:1 d:1 e:1',
      'refused a:1 b:1 c:1', // its first half alone; d:1 e:1 wait at the head of the queue
      'append a:1 b:1',
      'a:1 accepted',
      'b:1 accepted',
      'refused c:1', // alone: it fails, and c:2, built on it, with it
      'refused c',
      'c:1 failed: c:1 cannot be written',
      'c:2 failed: c:1 cannot be written',
      'append d:1 e:1', // the second half alone
      'd:1 accepted',
      'e:1 accepted',
      'append f:1', // what was queued meanwhile
      'f:1 accepted',
    ]);
  });

  it("on a store that cannot be reached (unavailable), fails the whole batch, unsplit, and the queued runes of its streams; other streams' go on", async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: false });
    const { queue, sink, settled } = queueOn(recorder.store, log);
    const diskFull = new StoreError('unavailable', 'the connection was lost');
    const release = recorder.hold();
    recorder.failNextAppend(diskFull);
    queue.enqueue(instanceOf('a'), runeOf('a', 1), {}, sink, 'a:1');
    queue.enqueue(instanceOf('b'), runeOf('b', 1), {}, sink, 'b:1');
    await turn();
    queue.enqueue(instanceOf('a'), runeOf('a', 2), {}, sink, 'a:2');
    queue.enqueue(instanceOf('c'), runeOf('c', 1), {}, sink, 'c:1');
    release();
    await settled();
    expect(log).toEqual([
      'append a:1 b:1',
      'refused a',
      'refused b',
      'a:1 failed: the connection was lost',
      'b:1 failed: the connection was lost',
      'a:2 failed: the connection was lost',
      'append c:1',
      'published c:1',
      'c:1 accepted',
    ]);
  });
});

describe('CommitQueue: fences per stream', () => {
  const fenceOf = (stream: string) => (stream === 'old' ? { lease: 'shard-1', epoch: 1 } : stream === 'none' ? undefined : { lease: 'shard-2', epoch: 5 });

  it("a batch carries the fences of its streams, each once; at once, a rune carries its stream's", async () => {
    const log: string[] = [];
    const seen: unknown[] = [];
    const store = memoryStore();
    const spied: RuneStore = {
      ...store,
      appendSync: undefined,
      append: (runes, options) => (seen.push(options), store.append(runes, options)),
    };
    const { queue, sink, settled } = queueOn(spied, log, {}, { writer: 'w', fence: fenceOf });
    for (const stream of ['a', 'old', 'b', 'none']) queue.enqueue(instanceOf(stream), runeOf(stream, 1), {}, sink, `${stream}:1`);
    await settled();
    expect(seen).toEqual([
      {
        writer: 'w',
        fences: [
          { lease: 'shard-2', epoch: 5 },
          { lease: 'shard-1', epoch: 1 },
        ],
      },
    ]);

    const synced: unknown[] = [];
    const sync = queueOn({ ...store, appendSync: (rune, options) => (synced.push(options), store.appendSync!(rune, options)) }, log, {}, { fence: fenceOf });
    sync.queue.enqueue(instanceOf('old', 1), runeOf('old', 2), {}, sync.sink, 'old:2');
    sync.queue.enqueue(instanceOf('none', 1), runeOf('none', 2), {}, sync.sink, 'none:2');
    expect(synced).toEqual([{ fences: [{ lease: 'shard-1', epoch: 1 }] }, undefined]);
  });

  it("a fence refused fails the runes of the streams under that lease, and those queued behind them; the batch's other streams are appended again", async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: false });
    await recorder.inner.raiseFence!({ lease: 'shard-1', epoch: 2 });
    const { queue, sink, settled } = queueOn(recorder.store, log, {}, { fence: fenceOf });
    const release = recorder.hold();
    queue.enqueue(instanceOf('old'), runeOf('old', 1), {}, sink, 'old:1');
    queue.enqueue(instanceOf('a'), runeOf('a', 1), {}, sink, 'a:1');
    await turn();
    queue.enqueue(instanceOf('old', 1), runeOf('old', 2), {}, sink, 'old:2');
    release();
    await settled();
    const fenced = 'failed: lease "shard-1": epoch 1 is fenced off by epoch 2; nothing of the batch was written';
    expect(log).toEqual(['append old:1 a:1', 'refused old', `old:1 ${fenced}`, `old:2 ${fenced}`, 'append a:1', 'published a:1', 'a:1 accepted']);
  });
});

describe('CommitQueue: the work after a commit', () => {
  it('waits for it (snapshot saves) before appending the next batch', async () => {
    const log: string[] = [];
    const recorder = loggingStore(log, { sync: false });
    let finish!: () => void;
    let pendingWork: Promise<void> | undefined;
    const { queue, sink, settled } = queueOn(recorder.store, log, {
      committed: () => {
        if (pendingWork !== undefined) return undefined;
        log.push('work started');
        pendingWork = new Promise<void>((resolve) => (finish = resolve)).then(() => void log.push('work done'));
        return pendingWork;
      },
    });
    const a = instanceOf('a');
    queue.enqueue(a, runeOf('a', 1), {}, sink, 'a:1');
    await turn();
    await turn();
    queue.enqueue(a, runeOf('a', 2), {}, sink, 'a:2');
    await turn();
    await turn();
    expect(log).toEqual(['append a:1', 'published a:1', 'a:1 accepted', 'work started']);
    finish();
    await settled();
    expect(log.slice(4)).toEqual(['work done', 'append a:2', 'published a:2', 'a:2 accepted']);
  });
});
