import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { reactAgentEpics, scriptedModel } from '../../../src/agents.js';
import { agentStreams, createEngine, type AgentState, type EngineError } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { runAndKill } from '../../support/kill-worker.js';
import { storeLog } from '../../support/store-log.js';

const workerScript = fileURLToPath(new URL('../../fixtures/react-crash-worker.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'runestream-react-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ReAct agent crash: the process dies with SIGKILL while an LLM call is in flight', () => {
  it('a fresh engine on the file makes the call again, the model loads older messages (an internal tool), and the started message is completed', async () => {
    const path = join(dir, 'react.db');
    const stream = agentStreams('conv/c1', 'a1').react;
    const run = await runAndKill(workerScript, [path]);
    expect(run.signal).toBe('SIGKILL');
    expect(run.stderr).not.toContain('react-crash-worker:');
    expect(run.line).toBe('calling 27'); // spawn, 6 × (question, started, completed, observed), question 7, started

    const store = sqliteStore(path); // recovers the WAL the dead worker left
    const before = (await storeLog(store)).filter((r) => r.stream === stream);
    expect(before.at(-1)?.event).toMatchObject({ type: 'llm-message-started' });
    const startedId = before.at(-1)?.event.messageId;

    // The model, asked again: first it wants the older messages, then it answers.
    const model = scriptedModel([{ toolCalls: [{ toolName: 'load_older_messages', input: {}, toolCallId: 'i1' }] }, { text: 'You first asked question 1.' }]);
    const engine = createEngine({ store, epics: reactAgentEpics({ model }) });
    const errors: EngineError[] = [];
    engine.errors$.subscribe((error) => errors.push(error));
    try {
      const state = await firstValueFrom(engine.state$<AgentState>(stream).pipe(filter((s) => s.reActContext === null && s.messages.length === 14)));
      const after = (await storeLog(store)).filter((r) => r.stream === stream && r.seq > before.length);
      // The internal round is recorded as it is answered (its usage), before the model is asked again.
      expect(after.map((r) => r.kind)).toEqual(['context-window-expanded', 'llm-round-answered', 'llm-message-completed', 're-act-observed']);

      // The message the dead process started is the one completed: no second answer.
      expect(state.messages.at(-1)).toMatchObject({ id: startedId, role: 'assistant', content: 'You first asked question 1.', streaming: false });
      expect(state.messages.filter((m) => m.role === 'assistant' && m.streaming)).toEqual([]);
      // The internal call is not in the history.
      expect(state.toolCalls).toEqual({});

      expect(model.doStreamCalls).toHaveLength(2);
      const [first, second] = model.doStreamCalls.map((call) => call.prompt);
      const texts = (prompt: typeof first) => JSON.stringify(prompt);
      // The window held the last ten messages; the older ones came with the internal tool.
      expect(texts(first)).not.toContain('question 1"');
      expect(texts(first)).toContain('question 7');
      expect(model.doStreamCalls[0]!.tools?.map((t) => t.name)).toEqual(['load_older_messages', 'query_tool_calls', 'load_tool_call_results']);
      expect(texts(second)).toContain('question 1"');
      expect(second!.slice(-2).map((m) => m.role)).toEqual(['assistant', 'tool']); // the internal round, for this call only
      expect(errors).toEqual([]);
    } finally {
      await engine.close(); // closes the store too
    }
  });
});
