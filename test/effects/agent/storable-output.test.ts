import { filter, firstValueFrom } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../../src/agents.js';
import { createEngine, type Engine, type ToolCallState, type TurnEngineState } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { POSTGRES_URL, dropSchemas, randomSchema } from '../../support/postgres.js';

const schemas: string[] = [];
let engine: Engine | undefined;
afterEach(async () => {
  await engine?.close();
  engine = undefined;
});
afterAll(() => dropSchemas(schemas));

describe("agents on PostgreSQL: a model's text and a tool's output with a NUL or a lone surrogate", () => {
  it('are stored with U+FFFD in their place: the call ends with its result, and the turn with its answer', async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const store = await postgresStore({ connectionString: POSTGRES_URL, schema });
    const grep = defineTool({
      name: 'grep',
      description: 'Searches a binary file.',
      inputSchema: z.object({}),
      execute: () => ({ match: 'ELF\u0000\u0001', name: 'x\udc00' }),
    });
    const model = scriptedModel([{ text: 'Look\u0000ing.', toolCalls: [{ toolName: 'grep', input: {}, toolCallId: 'k1' }] }, { text: 'Found \ud800it.' }]);
    engine = createEngine({ store, epics: agentEpics({ model, tools: [grep] }) });
    const turn = 'conv/c1/agent/a1/turn';
    await engine.spawn(turn, 'turn-engine');
    const answered = firstValueFrom(engine.state$<TurnEngineState>(turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await engine.dispatch(turn, { type: 'start_turn', input: 'Find it.' });
    expect((await answered).output).toBe('Look\ufffding.Found \ufffdit.');
    const call = await engine.snapshot<ToolCallState>('conv/c1/agent/a1/call/k1');
    expect(call?.state).toMatchObject({ value: 'completed_result', output: { match: 'ELF\ufffd\u0001', name: 'x\ufffd' } });
    // As stored: every string is one PostgreSQL keeps.
    const deltas = (await store.read(turn)).flatMap((rune) => (rune.kind === 'turn.assistant_delta' ? [rune.event.content] : []));
    expect(deltas.join('')).toBe('Look\ufffding.Found \ufffdit.');
  });
});
