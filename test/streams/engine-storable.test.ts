import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, firstValueFrom, map, of, take, toArray } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createEngine, memoryStore, StoreError, type DispatchResult, type Engine, type Epic, type EpicCommand, type Rune, type RuneStore } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { sqliteStore } from '../../src/sqlite.js';
import { POSTGRES_URL, dropSchemas, randomSchema } from '../support/postgres.js';

/** Every schema and directory a test made, removed after all of them. */
const schemas: string[] = [];
const dirs: string[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});
afterAll(async () => {
  await dropSchemas(schemas);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The three stores, each fresh: memory, a SQLite file in a temp dir, a PostgreSQL schema of its own. */
const stores: Record<string, () => Promise<RuneStore>> = {
  memory: async () => memoryStore(),
  sqlite: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runestream-storable-'));
    dirs.push(dir);
    return sqliteStore(join(dir, 'runes.db'));
  },
  postgres: async () => {
    const schema = randomSchema();
    schemas.push(schema);
    return postgresStore({ connectionString: POSTGRES_URL, schema });
  },
};

/** An engine on `store`, closed after the test. */
const engineOn = (store: RuneStore): Engine => {
  const engine = createEngine({ store });
  engines.push(engine);
  return engine;
};

const BYSTANDERS = 10;
const bystanders = Array.from({ length: BYSTANDERS }, (_, i) => `user-${i}/chat`);

/** The kinds of a stream's stored runes. */
const kindsOf = async (store: RuneStore, stream: string): Promise<string[]> => (await store.read(stream)).map((rune: Rune) => rune.kind);

describe.each(Object.keys(stores))('engine on the %s store: strings no store keeps', (name) => {
  it('refuses a NUL in a string, and a lone surrogate in a key and in a value, with invalid_string, appending nothing, while bystanders in the same batch are all acked and stored', async () => {
    const store = await stores[name]!();
    const engine = engineOn(store);
    for (const stream of [...bystanders, 'victim/chat']) expect(await engine.spawn(stream, 'chat-actor')).toMatchObject({ accepted: true });

    // One turn of the event loop: the bad ones among the bystanders' dispatches and spawns, as one batch would carry them.
    const bad: Promise<DispatchResult>[] = [
      engine.dispatch('victim/chat', { type: 'Pause', reason: 'lunch\u0000break' }),
      engine.dispatch('victim/chat', { type: 'Pause', reason: 'lunch', ['note\ud800']: 'x' }),
      engine.dispatch('victim/chat', { type: 'Pause', reason: 'lunch\ud800' }),
      engine.spawn('victim/call', 'tool-call', { callId: 'c', toolName: 'search', arguments: { q: 'a\u0000' } }),
    ];
    const good = bystanders.flatMap((stream, i) => [
      engine.dispatch(stream, { type: 'Pause', reason: `lunch ${i} \u{1F642}` }),
      engine.spawn(`${stream}/call`, 'tool-call', { callId: `c${i}`, toolName: 'search', arguments: { q: 'ok' } }),
    ]);
    const [nul, badKey, badValue, badSpawn] = await Promise.all(bad);
    expect(nul).toEqual({
      accepted: false,
      code: 'invalid_string',
      reason: 'event.reason: a string has a NUL character (\\u0000) at index 5: PostgreSQL cannot keep one, so no store takes it',
    });
    expect(badKey).toEqual({
      accepted: false,
      code: 'invalid_string',
      reason: 'event: a key has a lone surrogate (\\ud800) at index 4: it is not text UTF-8 can carry, so no store takes it',
    });
    expect(badValue).toMatchObject({
      accepted: false,
      code: 'invalid_string',
      reason: expect.stringMatching(/^event\.reason: a string has a lone surrogate \(\\ud800\) at index 5/),
    });
    expect(badSpawn).toMatchObject({ accepted: false, code: 'invalid_string', reason: expect.stringMatching(/^input\.arguments\.q: a string has a NUL/) });
    for (const result of await Promise.all(good)) expect(result).toMatchObject({ accepted: true });

    expect(await kindsOf(store, 'victim/chat')).toEqual(['spawned']);
    expect(await store.head('victim/call')).toBeUndefined();
    for (const [i, stream] of bystanders.entries()) {
      expect(await store.read(stream)).toMatchObject([{ seq: 1 }, { seq: 2, event: { type: 'Pause', reason: `lunch ${i} \u{1F642}` } }]);
      expect(await store.head(`${stream}/call`)).toMatchObject({ seq: 1 });
    }
    // The victim's stream carries on.
    expect(await engine.dispatch('victim/chat', { type: 'Pause', reason: 'lunch' })).toMatchObject({ accepted: true, rune: { seq: 2 } });
  });

  it('a batch the store refuses for one rune fails only that dispatch: every bystander in the batch is acked and stored', async () => {
    const inner = await stores[name]!();
    // A store that cannot take one rune, whatever company it keeps (any cause: here its own refusal).
    const picky: RuneStore = {
      ...inner,
      appendSync: undefined, // batches, even in memory
      append: (runes, options) =>
        runes.some((rune) => (rune.event as { reason?: string }).reason === 'poison')
          ? Promise.reject(new StoreError('io_error', 'this store cannot write the poison rune'))
          : inner.append(runes, options),
      close: () => inner.close(),
    };
    const engine = engineOn(picky);
    for (const stream of [...bystanders, 'victim/chat']) await engine.spawn(stream, 'chat-actor');

    const results = await Promise.allSettled([
      ...bystanders.slice(0, 5).map((stream) => engine.dispatch(stream, { type: 'Pause', reason: 'lunch' })),
      engine.dispatch('victim/chat', { type: 'Pause', reason: 'poison' }),
      ...bystanders.slice(5).map((stream) => engine.dispatch(stream, { type: 'Pause', reason: 'lunch' })),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? (r.value.accepted ? 'acked' : r.value.code) : (r.reason as StoreError).code))).toEqual([
      ...Array(5).fill('acked'),
      'io_error',
      ...Array(5).fill('acked'),
    ]);
    for (const stream of bystanders) expect(await inner.head(stream)).toMatchObject({ seq: 2, value: 'paused' });
    expect(await inner.head('victim/chat')).toMatchObject({ seq: 1, value: 'idle' });
    expect(await engine.dispatch('victim/chat', { type: 'Pause', reason: 'lunch' })).toMatchObject({ accepted: true, rune: { seq: 2 } });
  });
});

describe('engine on PostgreSQL: a rune jsonb refuses after the engine took it', () => {
  it("fails only that rune's dispatch with invalid_rune; the batch's other dispatches are acked and stored", async () => {
    const inner = await stores.postgres!();
    // A NUL the engine never saw (a store's own encoding, say): PostgreSQL itself refuses the batch that carries it.
    const garbling: RuneStore = {
      ...inner,
      append: (runes, options) =>
        inner.append(
          runes.map((rune) => ((rune.event as { reason?: string }).reason === 'poison' ? { ...rune, event: { type: 'Pause', reason: 'poi\u0000son' } } : rune)),
          options,
        ),
      close: () => inner.close(),
    };
    const engine = engineOn(garbling);
    for (const stream of [...bystanders, 'victim/chat']) await engine.spawn(stream, 'chat-actor');
    const results = await Promise.allSettled([
      engine.dispatch('victim/chat', { type: 'Pause', reason: 'poison' }),
      ...bystanders.map((stream) => engine.dispatch(stream, { type: 'Pause', reason: 'lunch' })),
    ]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: { code: 'invalid_rune' } });
    expect(results.slice(1).map((r) => r.status === 'fulfilled' && r.value.accepted)).toEqual(Array(BYSTANDERS).fill(true));
    for (const stream of bystanders) expect(await inner.head(stream)).toMatchObject({ seq: 2 });
    expect(await inner.head('victim/chat')).toMatchObject({ seq: 1 });
  });
});

describe('engine: what epics emit', () => {
  it("makes a model's or a tool's text storable (a NUL or a lone surrogate becomes U+FFFD) instead of refusing it, in the order emitted", async () => {
    const store = await stores.postgres!();
    const model: Epic = () =>
      of<EpicCommand[]>(
        { stream: 'conv/c/agent/a/turn', spawn: 'turn-engine' },
        { stream: 'conv/c/agent/a/turn', event: { type: 'start_turn', input: 'hi' } },
        { stream: 'conv/c/agent/a/turn', event: { type: 'assistant_delta', content: 'a' } },
        { stream: 'conv/c/agent/a/turn', event: { type: 'assistant_delta', content: 'b\u0000c' } },
        { stream: 'conv/c/agent/a/turn', event: { type: 'assistant_delta', content: '\ud800d' } },
        { stream: 'conv/c/agent/a/turn', event: { type: 'assistant_delta', content: 'e' } },
      );
    const engine = createEngine({ store, epics: [model] });
    engines.push(engine);
    const reports: unknown[] = [];
    engine.errors$.subscribe((report) => reports.push(report));
    const deltas = await firstValueFrom(
      engine.runes$().pipe(
        filter((rune) => rune.kind === 'turn.assistant_delta'),
        map((rune) => rune.event.content),
        take(4),
        toArray(),
      ),
    );
    expect(deltas).toEqual(['a', 'b\ufffdc', '\ufffdd', 'e']);
    expect((await store.read('conv/c/agent/a/turn')).flatMap((rune) => (rune.kind === 'turn.assistant_delta' ? [rune.event.content] : []))).toEqual([
      'a',
      'b\ufffdc',
      '\ufffdd',
      'e',
    ]);
    expect(reports).toEqual([]);
  });
});
