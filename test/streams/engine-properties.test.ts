import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { chatActor, type ChatActorState, type DispatchResult, type Rune } from '../../src/index.js';
import { createEngine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import type { RuneStore } from '../../src/streams/store.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const STREAMS = ['a', 'b', 'c'] as const;
/** Events of every kind: accepted or not in each state, terminal ones, and two that are invalid. */
const EVENTS = [
  { type: 'Ping' },
  { type: 'ProcessInteraction', userId },
  { type: 'InteractionComplete', success: true },
  { type: 'InteractionComplete', success: false, error: 'model down' },
  { type: 'Pause', reason: 'lunch' },
  { type: 'Cancel', reason: 'user' },
  { type: 'InactivityTimeout' },
  { type: 'Shutdown' },
  { type: 'Pause', reason: 5 },
  { type: 'Explode' },
];

type Command =
  | { op: 'spawn'; stream: string }
  | { op: 'dispatch'; stream: string; event: number }
  /** Dispatch `event` from inside a subscriber, when the stream's next rune is published. */
  | { op: 'answer'; stream: string; event: number }
  | { op: 'release'; stream: string }
  /** Subscribe to the stream's runes after a seq: stored ones, then live ones. */
  | { op: 'join'; stream: string; afterSeq: number }
  | { op: 'turn' };

const stream = fc.constantFrom(...STREAMS);
const event = fc.nat({ max: EVENTS.length - 1 });
const command: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('spawn' as const), stream }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('dispatch' as const), stream, event }), weight: 6 },
  { arbitrary: fc.record({ op: fc.constant('answer' as const), stream, event }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('release' as const), stream }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('join' as const), stream, afterSeq: fc.nat({ max: 6 }) }), weight: 1 },
  { arbitrary: fc.constant({ op: 'turn' as const }), weight: 1 },
);

const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Runs the commands against an engine on `store`, without awaiting dispatches between them (as a
 * busy server does), then checks what every store must end with, whichever write path it took.
 */
async function check(store: RuneStore, commands: readonly Command[]): Promise<void> {
  const engine = createEngine({ store, snapshotEvery: 4 });
  const seen = new Map<string, number[]>(); // seqs each stream's runes came in, to a runes$() subscriber
  const answers = new Map<string, number[]>();
  const results: Promise<DispatchResult>[] = [];
  const lastStates = new Map<string, ChatActorState>();
  // The first subscriber answers from inside its callback; the second, called after it for the
  // same rune, must still hear every stream's runes in seq order.
  engine.runes$().subscribe((rune) => {
    const answer = answers.get(rune.stream)?.shift();
    if (answer !== undefined) results.push(engine.dispatch(rune.stream, EVENTS[answer]));
  });
  engine.runes$().subscribe((rune) => seen.set(rune.stream, [...(seen.get(rune.stream) ?? []), rune.seq]));
  const watched = new Set<string>();
  const joiners: { stream: string; afterSeq: number; seqs: number[] }[] = [];
  for (const c of commands) {
    if (c.op === 'spawn') {
      results.push(engine.spawn(c.stream, chatActor));
      if (!watched.has(c.stream)) {
        watched.add(c.stream);
        engine.state$<ChatActorState>(c.stream).subscribe({ next: (s) => lastStates.set(c.stream, s), error: () => watched.delete(c.stream) });
      }
    } else if (c.op === 'dispatch') results.push(engine.dispatch(c.stream, EVENTS[c.event]));
    else if (c.op === 'answer') answers.set(c.stream, [...(answers.get(c.stream) ?? []), c.event]);
    else if (c.op === 'release') engine.release(c.stream);
    else if (c.op === 'join') {
      const joiner = { stream: c.stream, afterSeq: c.afterSeq, seqs: [] as number[] };
      joiners.push(joiner);
      engine.runes$(c.stream, { afterSeq: c.afterSeq }).subscribe({ next: (r) => joiner.seqs.push(r.seq), error: () => {} });
    } else await turn();
  }
  // Answers dispatched late land in `results` as it grows: wait until it stops growing.
  for (let settled = 0; settled < results.length; ) {
    const upTo = results.length;
    await Promise.allSettled(results.slice(settled, upTo));
    settled = upTo;
    await turn();
  }
  const outcomes = await Promise.all(results);

  for (const name of STREAMS) {
    const stored = await store.read(name);
    const head = await store.head(name);
    // Gapless, from the spawn.
    expect(stored.map((r) => r.seq)).toEqual(stored.map((_, i) => i + 1));
    expect(head?.seq ?? 0).toBe(stored.length);
    if (stored.length === 0) continue;
    // The state is the fold of the log, and what a state$ subscriber saw last.
    const folded = stored.slice(1).reduce((s, r) => chatActor.transition(s, r.event as never), chatActor.initial());
    expect((await engine.snapshot(name))?.state).toEqual(folded);
    if (watched.has(name)) expect(lastStates.get(name)).toEqual(folded);
    // Every live rune reached the subscriber once, in seq order.
    expect(seen.get(name)).toEqual(stored.map((r) => r.seq));
  }
  // A joiner got every rune after its seq, stored then live, with no gap and no duplicate.
  for (const { stream: name, afterSeq, seqs } of joiners) {
    const head = (await store.head(name))?.seq ?? 0;
    expect(seqs).toEqual(Array.from({ length: Math.max(0, head - afterSeq) }, (_, i) => afterSeq + i + 1));
  }
  // Each accepted result is the rune the store holds; a rejection appended nothing.
  const accepted = outcomes.filter((o): o is { accepted: true; rune: Rune } => o.accepted);
  for (const { rune } of accepted) expect((await store.read(rune.stream, rune.seq - 1, 1))[0]).toEqual(rune);
  const storedCount = (await Promise.all(STREAMS.map((s) => store.read(s)))).reduce((n, runes) => n + runes.length, 0);
  expect(accepted.length).toBe(storedCount);
  await engine.close();
}

const dir = mkdtempSync(join(tmpdir(), 'runestream-engine-properties-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

describe('engine properties: random spawns, dispatches, answers from inside subscribers, releases and turns', () => {
  const commands = fc.array(command, { minLength: 1, maxLength: 40 });

  it('memory store (commits at once): gapless logs, states that are their folds, every rune heard once in order', async () => {
    await fc.assert(
      fc.asyncProperty(commands, (cs) => check(memoryStore(), cs)),
      { numRuns: 150 },
    );
  });

  it('a store without appendSync (batches): the same', async () => {
    await fc.assert(
      fc.asyncProperty(commands, (cs) => check({ ...memoryStore(), appendSync: undefined }, cs)),
      { numRuns: 150 },
    );
  });

  it('sqliteStore on a real file: the same', async () => {
    await fc.assert(
      fc.asyncProperty(commands, (cs) => check(sqliteStore(join(dir, `p-${++files}.db`)), cs)),
      { numRuns: 40 },
    );
  });
});
