import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { agentEpics, scriptedModel, type ScriptedModel } from '../../../src/agents.js';
import { subAgentId } from '../../../src/effects/agent/delegation.js';
import { agentStreams, checkInvariants, createEngine, memoryStore, type Engine, type RuneStore, type TurnEngineState } from '../../../src/index.js';
import { storeLog } from '../../support/store-log.js';

/**
 * A delegated call is claimed like every tool run (`execution_claimed`, a `tool.claimed` rune)
 * before its sub-agent is spawned; after a restart it is claimed again, superseding the dead
 * run's claim, and finds its sub-agent: one sub-agent, never a second spawn.
 */

const ROOT = agentStreams('conv/c1', 'root');
const SUB = agentStreams('conv/c1', subAgentId('root', 'd1'));

/** A store several engines share, which outlives each of them (as a database would). */
const shared = (store: RuneStore): RuneStore => ({ ...store, close: async () => {} });

/** An engine on `store` whose root agent is a `lead` on `lead`, with `researcher` sub-agents on `researcher`. */
function engineOn(store: RuneStore, lead: ScriptedModel, researcher: ScriptedModel): Engine {
  return createEngine({ store: shared(store), epics: agentEpics({ model: lead, agents: { lead: {}, researcher: { model: researcher } } }) });
}

describe('delegation claims its call (memory store)', () => {
  it('a delegate call has one claim per run and one sub-agent across a restart: the new run supersedes the dead claim and finds its sub-agent', async () => {
    const store = memoryStore();
    // The first process: the lead delegates, the researcher starts answering and hangs; then the process stops.
    const first = engineOn(
      store,
      scriptedModel([{ toolCalls: [{ toolName: 'delegate', input: { role: 'researcher', task: 'find A' }, toolCallId: 'd1' }] }]),
      scriptedModel([{ text: 'Looking', hang: true, afterDeltas: 1 }]),
    );
    await first.spawn(ROOT.lifecycle, 'agent-lifecycle', { agentId: 'root', role: 'lead' });
    await first.spawn(ROOT.turn, 'turn-engine');
    const streaming = firstValueFrom(first.runes$(SUB.turn).pipe(filter((rune) => rune.kind === 'turn.assistant_delta')));
    await first.dispatch(ROOT.turn, { type: 'start_turn', input: 'find A' });
    await streaming;
    await first.close();
    // It left the call executing, claimed, and its sub-agent mid-answer.
    const before = await store.read(ROOT.call('d1'));
    expect(before.map((rune) => rune.kind)).toEqual(['tool.call', 'no_approval_needed', 'tool.claimed']);
    expect((await store.read(SUB.turn)).at(-1)).toMatchObject({ kind: 'turn.assistant_delta', to: 'streaming' });

    // The restart: the call is claimed again and waits for the same sub-agent, whose cut turn is started once more.
    const researcher = scriptedModel([{ text: 'A is 1' }]);
    const second = engineOn(store, scriptedModel([{ text: 'A is 1, says the researcher.' }]), researcher);
    await firstValueFrom(second.state$<TurnEngineState>(ROOT.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await second.close();

    const call = await store.read(ROOT.call('d1'));
    const claims = call.filter((rune) => rune.kind === 'tool.claimed');
    expect(claims.map((rune) => rune.payload)).toEqual([
      { callId: 'd1', claim: expect.any(String), attempt: 1, supersedes: undefined },
      { callId: 'd1', claim: expect.any(String), attempt: 2, supersedes: claims[0]!.payload!['claim'] },
    ]);
    expect(call.filter((rune) => rune.kind === 'tool.result').map((rune) => rune.event)).toEqual([{ type: 'success', output: 'A is 1' }]);
    // One sub-agent, spawned once, by the first run; the second run found it.
    const log = await storeLog(store);
    expect(log.filter((rune) => rune.machine === 'agent-lifecycle' && rune.seq === 1).map((rune) => rune.stream)).toEqual([ROOT.lifecycle, SUB.lifecycle]);
    expect(log.filter((rune) => rune.stream === SUB.turn && rune.event.type === 'start_turn')).toHaveLength(2); // the task, and once more after the cut
    expect(researcher.doStreamCalls).toHaveLength(1);
    expect(checkInvariants(log)).toEqual([]);
  });
});
