import { NEVER, VirtualTimeScheduler, concat, filter, firstValueFrom, from, map, mergeMap, of, timer, type Observable } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentStreams, type Rune, type TurnEngineState } from '../../../src/index.js';
import { agentModel, type ModelCaller } from '../../../src/effects/agent/agent-model.js';
import { agentTurns } from '../../../src/effects/agent/agent-turns.js';
import type { ChainOutput, ModelPart } from '../../../src/effects/llm/model-types.js';
import { createEngine, type Engine } from '../../../src/streams/engine.js';
import { memoryStore } from '../../../src/streams/memory-store.js';
import type { RuneStore } from '../../../src/streams/store.js';
import { runVirtualTimeUntil } from '../../support/virtual-time.js';

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

const a = agentStreams('conv/c1', 'a1');
const parts = (answer: Observable<ModelPart>): Observable<ChainOutput> => answer.pipe(map((part): ChainOutput => ({ type: 'part', part })));
const answer = (text: string): Observable<ModelPart> =>
  from<ModelPart[]>([
    { type: 'text-delta', text },
    { type: 'finish', finishReason: 'stop' },
  ]);

/** A model answering each call with the next of `answers`. */
const scripted = (answers: readonly ((scheduler: VirtualTimeScheduler | undefined) => Observable<ModelPart>)[], scheduler?: VirtualTimeScheduler): ModelCaller => {
  let calls = 0;
  return () => parts(answers[calls++]!(scheduler));
};

function start(call: ModelCaller, scheduler?: VirtualTimeScheduler): { engine: Engine; store: RuneStore } {
  const store = memoryStore();
  const engine = createEngine({ store, ...(scheduler === undefined ? {} : { scheduler }), epics: [agentModel({ call }), agentTurns()] });
  engines.push(engine);
  return { engine, store };
}

const runeWhere = (engine: Engine, stream: string, matches: (rune: Rune) => boolean): Promise<Rune> => firstValueFrom(engine.runes$(stream).pipe(filter(matches)));
const turnsDone = (engine: Engine, turns: number) => firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === turns)));

describe('turn seams (issue 28 l)', () => {
  it('a start on a paused conversation is refused with held, nothing appended; resumed, it starts', async () => {
    const { engine, store } = start(scripted([() => answer('hi')]));
    await engine.spawn(a.turn, 'turn-engine');
    await runeWhere(engine, a.root, (r) => r.to === 'active');
    await engine.dispatch(a.root, { type: 'pause_requested', reason: 'lunch' });
    const before = (await store.read(a.turn)).length;
    expect(await engine.dispatch(a.turn, { type: 'start_turn', input: 'hi' })).toEqual({
      accepted: false,
      code: 'held',
      reason: 'event "start_turn" is held back: conversation "conv/c1" is paused (its streams take no start_turn until it is not)',
    });
    expect((await store.read(a.turn)).length).toBe(before);
    // Any other event still reaches the turn (an interrupt of nothing is the machine's to refuse).
    expect(await engine.dispatch(a.turn, { type: 'interrupt' })).toMatchObject({ accepted: false, code: 'not_allowed' });

    await engine.dispatch(a.root, { type: 'resume_requested' });
    expect(await engine.dispatch(a.turn, { type: 'start_turn', input: 'hi' })).toMatchObject({ accepted: true });
    expect((await turnsDone(engine, 1)).output).toBe('hi');
  });

  it('a paused conversation holds after a restart too: the hold is learnt from its stored head', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const first = createEngine({ store: kept, epics: [agentModel({ call: scripted([]) }), agentTurns()] });
    await first.spawn(a.turn, 'turn-engine');
    await firstValueFrom(first.runes$(a.root).pipe(filter((r) => r.to === 'active')));
    await first.dispatch(a.root, { type: 'pause_requested' });
    await first.close();
    const second = createEngine({ store: kept });
    engines.push(second);
    expect(await second.dispatch(a.turn, { type: 'start_turn', input: 'hi' })).toMatchObject({ accepted: false, code: 'held' });
  });

  it('a turn spawned with no input (as runestream serve tells clients) names its agent from its stream id in turn.started', async () => {
    const { engine, store } = start(scripted([() => answer('hi')]));
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'hello' });
    await turnsDone(engine, 1);
    const runes = await store.read(a.turn);
    expect(runes.find((r) => r.kind === 'turn.started')?.payload).toEqual({ turnId: '1', agentId: 'a1', input: 'hello' });
    expect(runes[0]!.event).toEqual({ type: 'spawn', input: { agentId: 'a1' } });
    // Outside the layout there is no agent to name: such a turn is refused (issue 28 i).
    expect(await engine.spawn('scratch/turn', 'turn-engine')).toMatchObject({ accepted: false, code: 'invalid_layout' });
  });

  it('a steer interrupts the turn with the reason "steered", which its agent hears too', async () => {
    const { engine, store } = start(scripted([() => concat(of<ModelPart>({ type: 'text-delta', text: 'Long' }), NEVER), () => answer('Brief.')]));
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'explain' });
    await runeWhere(engine, a.turn, (r) => r.kind === 'turn.assistant_delta');
    await engine.dispatch(a.turn, { type: 'steer', input: 'be brief' });
    await turnsDone(engine, 2);
    expect((await store.read(a.turn)).find((r) => r.kind === 'turn.interrupted')?.payload).toEqual({
      reason: 'steered',
      partialOutput: 'Long',
      steerInput: 'be brief',
      usage: { inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, wallClockMs: 0 }, // no response had ended
    });
    expect((await runeWhere(engine, a.lifecycle, (r) => r.kind === 'turn.interrupted')).event).toMatchObject({ reason: 'steered' });
  });

  it("a turn's own usage.wallClockMs is its time from start to end on the engine's scheduler (virtual time)", async () => {
    const scheduler = new VirtualTimeScheduler(undefined, 60_000);
    // The model answers 1,500 ms after it is called.
    const slow = (s: VirtualTimeScheduler | undefined) => timer(1500, s).pipe(mergeMap(() => answer('late')));
    const { engine, store } = start(scripted([slow], scheduler), scheduler);
    let runes = 0;
    engine.runes$().subscribe(() => runes++);
    await engine.spawn(a.turn, 'turn-engine');
    let value: string | undefined;
    engine.state$<TurnEngineState>(a.turn).subscribe((s) => (value = s.value));
    await runeWhere(engine, a.root, (r) => r.to === 'active');
    scheduler.maxFrames = 250; // the turn starts at 250 ms
    scheduler.flush();
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'hi' });
    scheduler.maxFrames = 60_000;
    expect(
      await runVirtualTimeUntil(
        scheduler,
        () => runes,
        () => value === 'idle' && runes > 0,
      ),
    ).toBe(true);
    const turn = await store.read(a.turn);
    const startedAt = turn.find((r) => r.kind === 'turn.started')!.at;
    const completed = turn.find((r) => r.kind === 'turn.completed')!;
    expect(completed.at - startedAt).toBe(1500);
    expect(completed.payload).toMatchObject({ finalOutput: 'late', usage: { modelCalls: 1, wallClockMs: 1500 } });
    // The agent's lifecycle and the conversation count the same time.
    expect((await runeWhere(engine, a.lifecycle, (r) => r.kind === 'turn.completed')).event).toMatchObject({ usage: { wallClockMs: 1500 } });
  });
});
