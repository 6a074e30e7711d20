import { filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../../src/agents.js';
import { checkInvariants, createEngine, memoryStore, type Engine, type TurnEngineState, agentStreams } from '../../../src/index.js';
import { storeLog } from '../../support/store-log.js';

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

describe('agentEpics: an agent with a model, tools and durable approval', () => {
  it('asks for a tool that needs approval, waits, and the approval itself carries the turn on to the answer; two approvals run it once', async () => {
    let runs = 0;
    const note = defineTool({
      name: 'write_note',
      description: 'Writes a note',
      inputSchema: z.object({ text: z.string() }),
      needsApproval: true,
      execute: ({ text }) => {
        runs++;
        return { saved: text };
      },
    });
    const model = scriptedModel([{ text: 'Let me save it.', toolCalls: [{ toolName: 'write_note', input: { text: 'milk' }, toolCallId: 'n1' }] }, { text: 'Saved.' }]);
    const store = memoryStore();
    const engine = createEngine({ store, epics: agentEpics({ model, tools: [note], system: 'You keep notes.' }) });
    engines.push(engine);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'note: milk' });

    const waiting = await firstValueFrom(engine.runes$(a.call('n1')).pipe(filter((r) => r.to === 'awaiting_approval')));
    expect(waiting.kind).toBe('tool.approval_requested');
    // Two clients approve at once: the machine takes the first; the tool runs once.
    const [first, second] = await Promise.all([
      engine.dispatch(a.call('n1'), { type: 'approved', approver: 'alice' }),
      engine.dispatch(a.call('n1'), { type: 'approved', approver: 'bob' }),
    ]);
    expect([first.accepted, second.accepted]).toEqual([true, false]);

    await firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    expect(runs).toBe(1);
    expect((await engine.snapshot<TurnEngineState>(a.turn))?.state.output).toBe('Let me save it.Saved.');
    expect((await engine.snapshot(a.call('n1')))?.state).toMatchObject({ value: 'completed_result', approver: 'alice', output: { saved: 'milk' } });
    // The second model call saw the tool's result.
    expect(JSON.stringify(model.doStreamCalls[1]!.prompt)).toContain('"saved":"milk"');
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });
});
