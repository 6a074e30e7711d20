import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NEVER, VirtualTimeScheduler, concat, filter, firstValueFrom, map, of, timer, type Observable } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentStreams, type Rune, type TurnEngineState } from '../../../src/index.js';
import { agentEpics, InvalidOptionError, scriptedModel } from '../../../src/agents.js';
import { agentModel, type ModelCaller } from '../../../src/effects/agent/agent-model.js';
import { agentTurns } from '../../../src/effects/agent/agent-turns.js';
import { transcriptOf } from '../../../src/effects/agent/transcript.js';
import type { ChainOutput, ModelPart } from '../../../src/effects/llm/model-types.js';
import type { turnEngine } from '../../../src/reducers/turn-engine/machine.js';
import type { RuneOf } from '../../../src/reducers/rune.js';
import { createEngine, type Engine } from '../../../src/streams/engine.js';
import { memoryStore } from '../../../src/streams/memory-store.js';
import type { RuneStore } from '../../../src/streams/store.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { ServerConfigError, parseServerConfig } from '../../../src/server/config/server-config.js';
import { runVirtualTimeUntil } from '../../support/virtual-time.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-delta-coalescing-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

const a = agentStreams('conv/c1', 'a1');
/** What the model answers: these deltas, one every 10 ms of virtual time. */
const PIECES = ['The ', 'answer ', 'is ', '42', '.'];

/** A model streaming `PIECES` on `scheduler`, one every 10 ms, then finishing (or, `hang`, never). */
const timedModel =
  (scheduler: VirtualTimeScheduler, end: 'finish' | 'hang' = 'finish'): ModelCaller =>
  () => {
    const deltas = PIECES.map((text) => timer(10, scheduler).pipe(map((): ModelPart => ({ type: 'text-delta', text }))));
    const last: Observable<ModelPart> = end === 'finish' ? of({ type: 'finish', finishReason: 'stop' }) : NEVER;
    return concat(...deltas, last).pipe(map((part): ChainOutput => ({ type: 'part', part })));
  };

/** An engine with the model and the turns on `store`, its turn started at 0 ms; its runes counted. */
async function started(store: RuneStore, scheduler: VirtualTimeScheduler, call: ModelCaller, deltaFlushMs?: number) {
  const engine = createEngine({ store, scheduler, epics: [agentModel({ call }, {}, deltaFlushMs === undefined ? {} : { deltaFlushMs }), agentTurns()] });
  engines.push(engine);
  let runes = 0;
  engine.runes$().subscribe(() => runes++);
  await engine.spawn(a.turn, 'turn-engine');
  let turn: TurnEngineState | undefined;
  engine.state$<TurnEngineState>(a.turn).subscribe((state) => (turn = state));
  await firstValueFrom(engine.runes$(a.root).pipe(filter((rune) => rune.to === 'active')));
  await engine.dispatch(a.turn, { type: 'start_turn', input: 'What is it?' });
  return { engine, count: () => runes, turn: () => turn };
}

/** The turn's runes, its delta runes' text, its output and its transcript, once it is idle again. */
async function answered(deltaFlushMs: number | undefined) {
  const scheduler = new VirtualTimeScheduler(undefined, 60_000);
  const store = memoryStore();
  const { count, turn } = await started(store, scheduler, timedModel(scheduler), deltaFlushMs);
  expect(await runVirtualTimeUntil(scheduler, count, () => turn()?.value === 'idle' && turn()?.turn === 1)).toBe(true);
  const runes = (await store.read(a.turn)) as RuneOf<typeof turnEngine>[];
  const deltas = runes.filter((rune) => rune.event.type === 'assistant_delta');
  return { deltas: deltas.map((rune) => [rune.at, (rune.event as { content: string }).content]), output: turn()?.output, transcript: transcriptOf(runes, new Map()) };
}

describe('deltaFlushMs: a turn appends its text coalesced (virtual time)', () => {
  it("the first delta at once, then at most one rune per window; the turn's output and transcript are the text deltaFlushMs 0 gives", async () => {
    const one = await answered(0);
    expect(one.deltas).toEqual([
      [10, 'The '],
      [20, 'answer '],
      [30, 'is '],
      [40, '42'],
      [50, '.'],
    ]);
    // Windows of 25 ms: "The " opens one at 10; what came by 35 is one rune, which opens the next; the rest comes before the end, at 50.
    const coalesced = await answered(25);
    expect(coalesced.deltas).toEqual([
      [10, 'The '],
      [35, 'answer is '],
      [50, '42.'],
    ]);
    expect(coalesced.output).toBe('The answer is 42.');
    expect(coalesced.output).toBe(one.output);
    expect(coalesced.transcript).toEqual(one.transcript);
    expect(coalesced.transcript.at(-1)).toEqual({ role: 'assistant', content: 'The answer is 42.' });
  });

  it('by default (50 ms) the deltas within 50 ms of the first are one rune', async () => {
    expect((await answered(undefined)).deltas).toEqual([
      [10, 'The '],
      [50, 'answer is 42.'],
    ]);
  });

  it('an engine that dies mid-window (durable store): the turn restarted is interrupted keeping the text appended, a prefix of the answer without the held text', async () => {
    const path = join(dir, 'mid-window.db');
    const scheduler = new VirtualTimeScheduler(undefined, 60_000);
    const first = await started(sqliteStore(path), scheduler, timedModel(scheduler, 'hang'), 25);
    // At 40 ms "The " (10) and "answer is " (35) are appended; "42" came at 40, held until 60.
    expect(await runVirtualTimeUntil(scheduler, first.count, () => scheduler.now() >= 40)).toBe(true);
    expect(first.turn()).toMatchObject({ value: 'streaming', output: 'The answer is ' });
    await first.engine.close();
    engines.splice(engines.indexOf(first.engine), 1);

    const store = sqliteStore(path);
    const second = createEngine({ store, scheduler: new VirtualTimeScheduler(), epics: [agentModel({ call: () => NEVER }), agentTurns()] });
    engines.push(second);
    const interrupted = await firstValueFrom(second.runes$(a.turn).pipe(filter((rune: Rune) => rune.kind === 'turn.interrupted')));
    // What was appended before the window: a prefix of "The answer is 42.", without the "42" the window held.
    expect(interrupted.payload).toEqual({
      reason: 'interrupted by restart',
      partialOutput: 'The answer is ',
      usage: { inputTokens: 0, outputTokens: 0, modelCalls: 1, toolCalls: 0, wallClockMs: 0 }, // the call the crash cut counts
    });
    const deltas = (await store.read(a.turn)).filter((rune) => rune.event.type === 'assistant_delta');
    expect(deltas.map((rune) => rune.event)).toEqual([
      { type: 'assistant_delta', content: 'The ' },
      { type: 'assistant_delta', content: 'answer is ' },
    ]);
  });

  it('agentEpics, agentModel and the configuration file refuse a deltaFlushMs out of range, with a code', () => {
    const model = scriptedModel([{ text: 'hi' }]);
    for (const deltaFlushMs of [-1, 2.5, 10_001, Number.NaN]) {
      expect(() => agentEpics({ model, deltaFlushMs })).toThrow(expect.objectContaining({ name: 'InvalidOptionError', code: 'invalid_option', option: 'deltaFlushMs' }));
      expect(() => agentModel({ call: () => NEVER }, {}, { deltaFlushMs })).toThrow(InvalidOptionError);
    }
    expect(() => agentEpics({ model, deltaFlushMs: 10_001 })).toThrow('agentEpics: "deltaFlushMs" Too big: expected number to be <=10000, got 10001');
    expect(() => agentModel({ call: () => NEVER }, {}, { deltaFlushMs: -1 })).toThrow('agentModel: "deltaFlushMs" Too small: expected number to be >=0, got -1');
    for (const deltaFlushMs of [0, 10_000]) expect(agentEpics({ model, deltaFlushMs }).length).toBeGreaterThan(0);

    const config = { models: { m: { type: 'demo' } }, agents: { a: { model: 'm' } }, defaultRole: 'a' };
    expect(parseServerConfig(JSON.stringify({ ...config, deltaFlushMs: 0 }), 'x').deltaFlushMs).toBe(0);
    expect(parseServerConfig(JSON.stringify(config), 'x').deltaFlushMs).toBeUndefined();
    expect(() => parseServerConfig(JSON.stringify({ ...config, deltaFlushMs: 10_001 }), 'runestream.json')).toThrow(
      expect.objectContaining({ code: 'config_invalid', message: 'runestream.json: deltaFlushMs: Too big: expected number to be <=10000' }),
    );
    expect(() => parseServerConfig(JSON.stringify({ ...config, deltaFlushMs: '50' }), 'x')).toThrow(ServerConfigError);
  });
});
