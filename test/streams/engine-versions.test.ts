import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom, lastValueFrom, take, toArray } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEngine, defineMachine, memoryStore, type Engine, type RuneStore } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';

// A counter whose version says which code wrote its runes.
const CounterState = z.object({ value: z.literal('counting'), n: z.number() });
type CounterState = z.infer<typeof CounterState>;
const CounterEvent = z.object({ type: z.literal('add'), by: z.number() });
type CounterEvent = z.infer<typeof CounterEvent>;
const counter = (version?: number) =>
  defineMachine<CounterState, CounterEvent>({
    id: 'counter',
    ...(version === undefined ? {} : { version }),
    states: ['counting'],
    terminal: [],
    events: ['add'],
    schemas: { state: CounterState, event: CounterEvent, input: z.void() },
    initial: () => ({ value: 'counting', n: 0 }),
    table: [{ from: 'counting', on: 'add', assign: (s, e) => ({ n: s.n + e.by }) }],
  });

const dirs: string[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const engineOn = (store: RuneStore, version?: number, followStore = false): Engine => {
  const engine = createEngine({ store, machines: { counter: counter(version) }, followStore });
  engines.push(engine);
  return engine;
};
const sqliteFile = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-versions-'));
  dirs.push(dir);
  return join(dir, 'log.db');
};

describe('machine versions', () => {
  it('defineMachine: version 1 unless given; a version that is not a positive integer is refused, naming it', () => {
    expect(counter().version).toBe(1);
    expect(counter(3).version).toBe(3);
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => counter(bad)).toThrow(`version must be a positive integer, got ${bad}`);
  });

  it('every rune records the version of the machine that wrote it: none for version 1, `v` after', async () => {
    const file = sqliteFile();
    const v1 = engineOn(sqliteStore(file));
    await v1.spawn('c', 'counter');
    await v1.dispatch('c', { type: 'add', by: 2 });
    await v1.close();
    const v2 = engineOn(sqliteStore(file), 2);
    const result = await v2.dispatch('c', { type: 'add', by: 3 }); // a newer version reads the older runes
    expect(result).toMatchObject({ accepted: true, rune: { seq: 3, v: 2 } });
    expect(await v2.snapshot('c')).toEqual({ stream: 'c', seq: 3, state: { value: 'counting', n: 5 } });
    const runes = await lastValueFrom(v2.runes$('c').pipe(take(3), toArray()));
    expect(runes.map((rune) => rune.v)).toEqual([undefined, undefined, 2]);
    expect(runes.slice(0, 2).every((rune) => !Object.hasOwn(rune, 'v'))).toBe(true);
  });

  it('an engine running an older version refuses the stream, never misreads it: dispatch, state$, runes$ and spawn', async () => {
    const file = sqliteFile();
    const v2 = engineOn(sqliteStore(file), 2);
    await v2.spawn('c', 'counter');
    await v2.close();
    const v1 = engineOn(sqliteStore(file));
    const reason = 'stream "c": rune 1 was written by version 2 of machine "counter", and this code runs version 1; it is refused, never misread';
    expect(await v1.dispatch('c', { type: 'add', by: 1 })).toEqual({ accepted: false, code: 'newer_version', reason });
    await expect(firstValueFrom(v1.state$('c'))).rejects.toMatchObject({ name: 'StreamReadError', code: 'newer_version', message: reason });
    await expect(firstValueFrom(v1.runes$('c'))).rejects.toMatchObject({ code: 'newer_version', message: reason });
    expect(await v1.spawn('c', 'counter')).toMatchObject({ accepted: false, code: 'stream_exists' });
  });

  it("a snapshot records the version that folded it; an older engine refuses a newer version's snapshot", async () => {
    const store = memoryStore();
    const v2 = createEngine({ store, machines: { counter: counter(2) }, snapshotEvery: 2 });
    engines.push(v2);
    await v2.spawn('c', 'counter');
    await v2.dispatch('c', { type: 'add', by: 4 });
    // Saved soon after the commit that made it due.
    for (let turn = 0; turn < 10 && (await store.latestSnapshot('c')) === undefined; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(await store.latestSnapshot('c')).toEqual({ stream: 'c', seq: 2, state: { value: 'counting', n: 4 }, v: 2 });
    // Runes of version 1, a snapshot folded by version 2 (which changed the state's shape, say).
    const mixed = memoryStore();
    await mixed.append([
      { stream: 'c', seq: 1, machine: 'counter', kind: 'spawned', event: { type: 'spawn' }, to: 'counting', at: 1 },
      { stream: 'c', seq: 2, machine: 'counter', kind: 'add', event: { type: 'add', by: 1 }, from: 'counting', to: 'counting', at: 2 },
    ]);
    await mixed.saveSnapshot({ stream: 'c', seq: 2, state: { value: 'counting', count: 1 }, v: 2 });
    const v1 = engineOn(mixed);
    expect(await v1.dispatch('c', { type: 'add', by: 1 })).toEqual({
      accepted: false,
      code: 'newer_version',
      reason: 'stream "c": its snapshot at seq 2 was folded by version 2 of machine "counter", and this code runs version 1; it is refused, never misread',
    });
  });

  it('an older engine following the store neither folds nor tells a newer rune another writer appended: the stream leaves its memory, and is refused after', async () => {
    const store = memoryStore();
    const older = engineOn(store, 1, true);
    const newer = engineOn(store, 2, true);
    await older.spawn('c', 'counter');
    const states: unknown[] = [];
    older.state$('c').subscribe((state) => states.push(state));
    const heard: string[] = [];
    older.runes$().subscribe((rune) => heard.push(`${rune.stream}:${rune.seq}`));
    expect(await newer.dispatch('c', { type: 'add', by: 5 })).toMatchObject({ accepted: true, rune: { seq: 2, v: 2 } });
    expect(states).toEqual([{ value: 'counting', n: 0 }]);
    expect(heard).toEqual([]);
    expect(older.machineOf('c')).toBeUndefined(); // left memory
    expect(await older.dispatch('c', { type: 'add', by: 1 })).toMatchObject({ accepted: false, code: 'newer_version' });
    // Nor one of a stream not in memory: its epics and runes$ subscribers hear nothing of it.
    await older.spawn('d', 'counter');
    older.release('d');
    expect(older.machineOf('d')).toBeUndefined();
    await newer.dispatch('d', { type: 'add', by: 1 });
    expect(heard).toEqual(['d:1']); // its own spawn only
  });
});
