import { VirtualTimeScheduler, filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentEpics, scriptedModel, type ScriptEntry } from '../../../src/agents.js';
import { subAgentId } from '../../../src/effects/agent/delegation.js';
import { agentStreams, checkInvariants, createEngine, memoryStore, type Engine, type RuneStore, type ToolCallState, type TurnEngineState } from '../../../src/index.js';
import { storeLog } from '../../support/store-log.js';
import { watchEngine } from '../../support/watched-engine.js';

/**
 * A paused conversation holds back every `start_turn` (`held`), a sub-agent's too, and the engine
 * tells an epic nothing of a refused command: a delegate call whose sub-agent's turn cannot start
 * must end by itself, with an error result saying why, whether it is run the first time or
 * resumed after a restart (seeds 6398 and 6577 of the simulation: a call `executing` for ever).
 */

const ROOT = agentStreams('conv/c1', 'root');
const SUB = agentStreams('conv/c1', subAgentId('root', 'd1'));
const DELEGATE = { toolCalls: [{ toolName: 'delegate', input: { role: 'researcher', task: 'find A' }, toolCallId: 'd1' }] };
const PAUSED = { type: 'execution_error', error: "the sub-agent's turn could not start: the conversation is paused" };

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

/** A store several engines share, which outlives each of them (as a database would). */
const shared = (store: RuneStore): RuneStore => ({ ...store, close: async () => {} });

/** An engine on `store` in virtual time, its root a `lead` on `lead`, its sub-agents `researcher`s on `researcher`. */
function engineOn(store: RuneStore, lead: readonly ScriptEntry[], researcher: readonly ScriptEntry[]) {
  const scheduler = new VirtualTimeScheduler(undefined, 600_000);
  const engine = createEngine({
    store: shared(store),
    scheduler,
    epics: agentEpics({ model: scriptedModel(lead), agents: { lead: {}, researcher: { model: scriptedModel(researcher) } } }),
  });
  engines.push(engine);
  return { engine, ...watchEngine(engine, scheduler) };
}

/** Runs `run` until the delegate call has ended and the root's turn is idle again after it, or nothing more happens. */
const settled = (run: ReturnType<typeof engineOn>) =>
  run.until(() => run.state<ToolCallState>(ROOT.call('d1'))?.value === 'error_result' && run.state<TurnEngineState>(ROOT.turn)?.value === 'idle');

describe('a delegate call whose sub-agent cannot start a turn (its conversation paused)', () => {
  it("resumed after a restart, the call whose sub-agent's cut turn is held back ends with an error result, and the root's turn is interrupted", async () => {
    const store = memoryStore();
    // The first process: the lead delegates, the researcher starts answering; the conversation is paused; the process stops.
    const first = engineOn(store, [DELEGATE], [{ text: 'Looking it up', hang: true, afterDeltas: 1 }]);
    await first.engine.spawn(ROOT.lifecycle, 'agent-lifecycle', { agentId: 'root', role: 'lead' });
    await first.engine.spawn(ROOT.turn, 'turn-engine');
    const streaming = firstValueFrom(first.engine.runes$(SUB.turn).pipe(filter((rune) => rune.kind === 'turn.assistant_delta')));
    await first.engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'find A' });
    await streaming;
    expect(await first.engine.dispatch(ROOT.root, { type: 'pause_requested', reason: 'user' })).toMatchObject({ accepted: true });
    await first.engine.close();
    expect((await store.read(ROOT.call('d1'))).at(-1)).toMatchObject({ kind: 'tool.claimed', to: 'executing' });

    // The restart: the researcher's cut turn is interrupted, and its task, to be started once more, is held back.
    const second = engineOn(store, [], []);
    await settled(second);
    const call = await store.read(ROOT.call('d1'));
    expect(call.filter((rune) => rune.kind === 'tool.result').map((rune) => [rune.to, rune.event])).toEqual([['error_result', PAUSED]]);
    const sub = await store.read(SUB.turn);
    expect(sub.filter((rune) => rune.event.type === 'start_turn')).toHaveLength(1); // the task, never started again
    expect(sub.at(-1)?.to).toBe('idle');
    // The root's turn hears the result, and is interrupted as any turn going on in a paused conversation.
    const root = await store.read(ROOT.turn);
    expect(root.slice(-2).map((rune) => [rune.kind, rune.event.type === 'interrupt' ? rune.event.reason : undefined, rune.to])).toEqual([
      ['turn.tools_finished', undefined, 'streaming'],
      ['turn.interrupted', 'the conversation is paused', 'idle'],
    ]);
    expect(checkInvariants(await storeLog(store))).toEqual([]);
    expect(second.errors).toEqual([]);
  });

  it('run the first time (paused before it ran) and again after a restart, the call ends with an error result and spawns no sub-agent', async () => {
    const store = memoryStore();
    // The lead asks for the delegation in the same moment as the conversation is paused.
    let engine: Engine | undefined;
    const pausing: ScriptEntry = () => {
      void engine!.dispatch(ROOT.root, { type: 'pause_requested', reason: 'user' });
      return DELEGATE;
    };
    const first = engineOn(store, [pausing], []);
    engine = first.engine;
    await first.engine.spawn(ROOT.lifecycle, 'agent-lifecycle', { agentId: 'root', role: 'lead' });
    await first.engine.spawn(ROOT.turn, 'turn-engine');
    await first.engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'find A' });
    await settled(first);
    await first.engine.close();
    const second = engineOn(store, [], []);
    await settled(second);

    const call = await store.read(ROOT.call('d1'));
    expect(call.filter((rune) => rune.kind === 'tool.result').map((rune) => [rune.to, rune.event])).toEqual([['error_result', PAUSED]]);
    expect(await store.read(SUB.turn)).toEqual([]);
    expect((await store.read(ROOT.turn)).at(-1)).toMatchObject({ kind: 'turn.interrupted', event: { reason: 'the conversation is paused' }, to: 'idle' });
    expect(checkInvariants(await storeLog(store))).toEqual([]);
    expect([...first.errors, ...second.errors]).toEqual([]);
  });
});
