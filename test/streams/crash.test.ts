import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstValueFrom } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { checkInvariants } from '../../src/reducers/invariants.js';
import type { AnyMachine, EventObject } from '../../src/reducers/machine.js';
import { machines } from '../../src/reducers/machines.js';
import type { Rune } from '../../src/reducers/rune.js';
import { createEngine, type Engine } from '../../src/streams/engine.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import type { RuneStore } from '../../src/streams/store.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const writerScript = fileURLToPath(new URL('../fixtures/crash-writer.ts', import.meta.url));

/** Acks to see before the kill. The writer keeps dispatching meanwhile: the kill lands wherever it is (in a commit, between ticks, ...). */
const ACKS_BEFORE_KILL = 3_000;
/** How long the writer may take to reach them (tsx start-up included) on a loaded machine. */
const SAFETY_MS = 20_000;
/** The writer snapshots every this many runes, so hydration after the crash starts from snapshots. */
const SNAPSHOT_EVERY = 20;

const dir = mkdtempSync(join(tmpdir(), 'runestream-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface WriterRun {
  /** Every `ack <stream> <seq>` line the writer completed before it died, in order. */
  acks: Array<{ stream: string; seq: number }>;
  /** Each append's size: runes and distinct streams. */
  batches: Array<{ runes: number; streams: number }>;
  /** Any other line: there should be none. */
  unexpected: string[];
  signal: NodeJS.Signals | null;
}

/**
 * Runs the writer on `path`, waits for `acks` acknowledgements on its stdout, kills it with SIGKILL
 * and resolves once it is dead and its stdout is drained. Rejects (after killing it) if it exits on
 * its own or does not get there within `SAFETY_MS`.
 */
function runAndKill(path: string, acks: number): Promise<WriterRun> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', writerScript, path, String(SNAPSHOT_EVERY)], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const run: WriterRun = { acks: [], batches: [], unexpected: [], signal: null };
  let stderr = '';
  let partial = '';
  let killed = false;
  return new Promise<WriterRun>((resolve, reject) => {
    const safety = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the writer gave ${run.acks.length} of ${acks} acks within ${SAFETY_MS} ms; stderr: ${stderr}`));
    }, SAFETY_MS);
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop()!; // a line cut by the kill is not an ack
      for (const line of lines) {
        const [word, a, b] = line.split(' ');
        if (word === 'ack') run.acks.push({ stream: a!, seq: Number(b) });
        else if (word === 'batch') run.batches.push({ runes: Number(a), streams: Number(b) });
        else run.unexpected.push(line);
      }
      if (!killed && run.acks.length >= acks) {
        killed = true;
        child.kill('SIGKILL');
      }
    });
    // 'close': the process has exited and its stdout is drained, so every ack it wrote is counted.
    child.once('close', (code, signal) => {
      clearTimeout(safety);
      run.signal = signal;
      if (killed) resolve(run);
      else reject(new Error(`the writer exited on its own (code ${code}, signal ${signal}) after ${run.acks.length} acks; stderr: ${stderr}`));
    });
  });
}

const valueOf = (state: unknown): string | undefined => {
  const value = typeof state === 'object' && state !== null ? (state as { value?: unknown }).value : undefined;
  return typeof value === 'string' ? value : undefined;
};

/**
 * Folds a stream's runes through its machine from seq 1, checking that every rune re-applies:
 * the spawn gives the initial state, and every later event is valid, accepted, and yields the
 * stored kind and from / to. Returns the state and every problem found.
 */
function fold(machine: AnyMachine, runes: readonly Rune[]): { state: unknown; problems: string[] } {
  const problems: string[] = [];
  let state: unknown;
  for (const rune of runes) {
    const where = `${rune.stream} seq ${rune.seq}`;
    if (rune.seq === 1) {
      state = machine.initial((rune.event as { input?: unknown }).input);
      if (rune.kind !== machine.spawnKind || rune.to !== valueOf(state)) problems.push(`${where}: spawn rune ${rune.kind} -> ${rune.to}`);
      continue;
    }
    const parsed = machine.schemas.event.safeParse(rune.event);
    if (!parsed.success) {
      problems.push(`${where}: stored event fails the schema: ${JSON.stringify(rune.event)}`);
      continue;
    }
    const step = machine.step(state, parsed.data as EventObject);
    if (!step.accepted) {
      problems.push(`${where}: ${rune.event.type} does not re-apply: ${step.code}: ${step.reason}`);
      continue;
    }
    if (step.kind !== rune.kind || valueOf(state) !== rune.from || valueOf(step.state) !== rune.to) {
      problems.push(`${where}: stored ${rune.kind} ${rune.from}->${rune.to}, re-applied ${step.kind} ${valueOf(state)}->${valueOf(step.state)}`);
    }
    state = step.state;
  }
  return { state, problems };
}

describe('crash: a writer killed with SIGKILL under load', () => {
  it('loses no acknowledged rune; after reopening, seqs are gapless, states are the fold of the log, invariants hold, and the engine carries on', async () => {
    const path = join(dir, 'crash.db');
    const run = await runAndKill(path, ACKS_BEFORE_KILL);
    expect(run.signal).toBe('SIGKILL');
    expect(run.unexpected).toEqual([]);
    expect(run.acks.length).toBeGreaterThanOrEqual(ACKS_BEFORE_KILL);
    // The writer's lanes do not wait for each other: appends held several streams at once.
    expect(Math.max(...run.batches.map((b) => b.streams))).toBeGreaterThan(1);

    const store = sqliteStore(path); // recovers the WAL the dead writer left
    const engine = createEngine({ store });
    try {
      await checkReopened(run, store, engine);
    } finally {
      await engine.close(); // closes the store too
    }
  }, 30_000);
});

/** Everything the test asserts about the file the killed writer left, reopened by `store` and `engine`. */
async function checkReopened(run: WriterRun, store: RuneStore, engine: Engine): Promise<void> {
  // Listed by the store itself: it holds the file locked, so no second connection could read it.
  const streams: string[] = [];
  for await (const head of store.heads()) streams.push(head.stream);

  // Every stream's runes: seq 1..head, no gap, no duplicate.
  const runesOf = new Map<string, Rune[]>();
  const gaps: string[] = [];
  for (const stream of streams) {
    const head = (await store.head(stream))!;
    const runes = await store.read(stream);
    runesOf.set(stream, runes);
    const seqs = runes.map((r) => r.seq);
    if (seqs.length !== head.seq || seqs.some((seq, i) => seq !== i + 1)) gaps.push(`${stream}: head ${head.seq}, seqs ${seqs.join(',')}`);
  }
  expect(gaps).toEqual([]);

  // Every acknowledged rune is there; and each stream was acknowledged in seq order, 1, 2, 3, ...
  const lost = run.acks.filter(({ stream, seq }) => runesOf.get(stream)?.[seq - 1]?.seq !== seq);
  expect(lost).toEqual([]);
  const ackedHead = new Map<string, number>();
  const outOfOrder: string[] = [];
  for (const { stream, seq } of run.acks) {
    const previous = ackedHead.get(stream) ?? 0;
    if (seq !== previous + 1) outOfOrder.push(`${stream}: ack ${seq} after ${previous}`);
    ackedHead.set(stream, seq);
  }
  expect(outOfOrder).toEqual([]);

  // Each stream's state is the fold of its log: folded here from seq 1, and hydrated by a fresh
  // engine (from the snapshots the writer saved, then the runes after them).
  const problems: string[] = [];
  const folded = new Map<string, unknown>();
  for (const [stream, runes] of runesOf) {
    const machine = machines[runes[0]!.machine as keyof typeof machines] as AnyMachine;
    const result = fold(machine, runes);
    problems.push(...result.problems);
    folded.set(stream, result.state);
    expect(await firstValueFrom(engine.state$(stream)), stream).toEqual(result.state);
  }
  expect(problems).toEqual([]);

  // complete: false because the tool call each lane had in flight when the writer died has no
  // result yet: the log of a process that stopped mid-call is a live log, not a finished one.
  const all = [...runesOf.values()].flat();
  expect(checkInvariants(all, { complete: false })).toEqual([]);
  const inFlight = [...folded].filter(([stream, state]) => stream.startsWith('tool-') && !machines['tool-call'].terminal.includes(valueOf(state)!));
  const unfinished = checkInvariants(all).map((v) => `${v.invariant} ${v.rune.stream}`);
  expect(unfinished.sort()).toEqual(inFlight.map(([stream]) => `INV-TOOL-TERMINAL ${stream}`).sort());

  // The engine carries on: the next dispatch on a hydrated stream gets the next seq ...
  const chatHead = runesOf.get('chat-0')!.length;
  expect(await engine.dispatch('chat-0', { type: 'Ping' })).toMatchObject({ accepted: true, rune: { stream: 'chat-0', seq: chatHead + 1 } });
  expect((await store.head('chat-0'))?.seq).toBe(chatHead + 1);
  // ... and ending the calls that were in flight makes the log a finished one.
  const endings: Rune[] = [];
  for (const [stream] of inFlight) {
    const result = await engine.dispatch(stream, { type: 'cancelled', reason: 'the writer crashed' });
    expect(result, stream).toMatchObject({ accepted: true, rune: { seq: runesOf.get(stream)!.length + 1, kind: 'tool.result' } });
    if (result.accepted) endings.push(result.rune);
  }
  expect(checkInvariants([...all, ...endings])).toEqual([]);
}
