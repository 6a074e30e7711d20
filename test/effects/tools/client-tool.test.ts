import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { createEngine, type ToolCallState, type TurnEngineState } from '../../../src/index.js';
import { agentEpics, clientTool, scriptedModel } from '../../../src/agents.js';

const lookup = clientTool({
  name: 'lookup',
  description: 'Looks a word up in the client’s dictionary.',
  inputSchema: { type: 'object', properties: { word: { type: 'string', minLength: 1 } }, required: ['word'] },
});

describe('clientTool', () => {
  it('the model calls it, the call waits in executing until the client dispatches its output, and the model reads it', async () => {
    const model = scriptedModel([{ toolCalls: [{ toolName: 'lookup', input: { word: 'rune' } }] }, { text: 'A rune is a letter.' }]);
    const engine = createEngine({ epics: agentEpics({ model, tools: [lookup] }) });
    const executing = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.machine === 'tool-call' && rune.to === 'executing')));
    await engine.spawn('conv/c1/agent/a1/turn', 'turn-engine');
    const answered = firstValueFrom(engine.state$<TurnEngineState>('conv/c1/agent/a1/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await engine.dispatch('conv/c1/agent/a1/turn', { type: 'start_turn', input: 'What is a rune?' });
    const call = await executing;
    expect((await engine.snapshot<ToolCallState>(call.stream))?.state).toMatchObject({ value: 'executing', toolName: 'lookup', arguments: { word: 'rune' } });
    expect(await engine.dispatch(call.stream, { type: 'success', output: 'a letter of an old alphabet' })).toMatchObject({ accepted: true });
    expect((await answered).output).toBe('A rune is a letter.');
    expect((await engine.snapshot<ToolCallState>(call.stream))?.state).toMatchObject({ value: 'completed_result', output: 'a letter of an old alphabet' });
    await engine.close();
  });

  it('checks the arguments with the compiled schema: a call that fails it ends with execution_error naming the field', async () => {
    const model = scriptedModel([{ toolCalls: [{ toolName: 'lookup', input: { word: '' } }] }, { text: 'Sorry.' }]);
    const engine = createEngine({ epics: agentEpics({ model, tools: [lookup] }) });
    const ended = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.machine === 'tool-call' && rune.to === 'error_result')));
    await engine.spawn('conv/c1/agent/a1/turn', 'turn-engine');
    await engine.dispatch('conv/c1/agent/a1/turn', { type: 'start_turn', input: 'Look up nothing' });
    expect((await ended).event).toMatchObject({ type: 'execution_error', error: expect.stringContaining('word') });
    await engine.close();
  });
});
