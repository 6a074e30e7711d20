import { HttpAgent, type BaseEvent } from '@ag-ui/client';
import { afterEach, describe, expect, it } from 'vitest';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

/** Runs `agent` once; the events it applied, in order. */
async function run(agent: HttpAgent, parameters: Parameters<HttpAgent['runAgent']>[0] = {}): Promise<BaseEvent[]> {
  const events: BaseEvent[] = [];
  await agent.runAgent(parameters, { onEvent: ({ event }) => void events.push(event) });
  return events;
}

describe('runestream serve: every configured agent answers AG-UI', () => {
  it('the demo agent at POST /agents/demo/ag-ui: a note interrupts for approval, the resume approves it, and the answer follows', async () => {
    const cli = runestream(['serve', '--port', '0', '--db', tempDb()]);
    await cli.line(LISTENING);
    const [, url] = await cli.line(/^runestream: AG-UI at (http:\/\/127\.0\.0\.1:\d+\/agents\/demo\/ag-ui)$/m);
    const agent = new HttpAgent({ url: url!, threadId: 'me' });
    agent.addMessage({ id: 'u1', role: 'user', content: 'note: buy milk' });
    const asked = await run(agent);
    expect(asked.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'interrupt', interrupts: [{ reason: 'tool_approval' }] } });
    const [interrupt] = agent.pendingInterrupts;

    const answered = await run(agent, { resume: [{ interruptId: interrupt!.id, status: 'resolved', payload: { approved: true } }] });
    const result = answered.find((event) => event.type === 'TOOL_CALL_RESULT');
    expect(JSON.parse(result!.content as string)).toMatchObject({ status: 'success', output: { saved: 'buy milk' } });
    expect(answered.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Done: {"saved":"buy milk","notes":1}' });
  });
});
