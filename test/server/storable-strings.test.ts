import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentEpics, scriptedModel } from '../../src/agents.js';
import { agentStreams, createEngine } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { agUiRoutes } from '../../src/server/ag-ui/ag-ui-routes.js';
import { POSTGRES_URL, dropSchemas, randomSchema } from '../support/postgres.js';
import { startServer } from '../support/ws-client.js';

const schemas: string[] = [];
let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});
afterAll(() => dropSchemas(schemas));

/** The frames an attacker sends, as raw JSON text: `\u0000` and a lone `\ud800` as a client writes them. */
const nulFrames = (n: number): string[] =>
  Array.from(
    { length: n },
    (_, i) =>
      [
        `{"op":"dispatch","id":"nul-${i}","stream":"mallory/chat","event":{"type":"Pause","reason":"lunch\\u0000${i}"}}`,
        `{"op":"dispatch","id":"nul-${i}","stream":"mallory/chat","event":{"type":"Pause","reason":"lunch","k\\ud800":${i}}}`,
        `{"op":"spawn","id":"nul-${i}","stream":"mallory/call-${i}","machine":"tool-call","input":{"callId":"c","toolName":"t","arguments":{"q":"\\u0000"}}}`,
        `{"op":"dispatch","id":"nul-${i}","stream":"mallory/chat","event":{"type":"Pause","reason":"\\ud800"}}`,
      ][i % 4]!,
  );

describe('server on PostgreSQL: frames with a NUL or a lone surrogate', () => {
  it("answers each with invalid_string while a bystander's spawns, sent at the same time, are all acked and stored", async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const store = await postgresStore({ connectionString: POSTGRES_URL, schema });
    const h = await startServer({}, { store });
    stop = h.stop;
    await h.engine.spawn('mallory/chat', 'chat-actor');
    const [mallory, bob] = [await h.connect(), await h.connect()];

    const SPAWNS = 40;
    const frames = nulFrames(35);
    const answers: Promise<unknown>[] = [];
    for (let i = 0; i < SPAWNS; i++) {
      const frame = frames[i];
      if (frame !== undefined) mallory.send(frame);
      answers.push(bob.request({ op: 'spawn', id: `bob-${i}`, stream: `bob/chat-${i}`, machine: 'chat-actor' }));
    }
    expect(await Promise.all(answers)).toEqual(Array.from({ length: SPAWNS }, (_, i) => ({ op: 'ack', id: `bob-${i}`, seq: 1 })));
    await mallory.until(() => mallory.messages.filter((m) => m.op === 'error').length === frames.length, 'an answer to every frame');
    expect(new Set(mallory.messages.map((m) => (m.op === 'error' ? m.code : m.op)))).toEqual(new Set(['invalid_string']));

    for (let i = 0; i < SPAWNS; i++) expect(await store.head(`bob/chat-${i}`)).toMatchObject({ seq: 1, value: 'idle' });
    expect(await store.head('mallory/chat')).toMatchObject({ seq: 1 });
    expect(await store.head('mallory/call-2')).toBeUndefined();
    // And the bystander's turn goes on.
    expect(await bob.request({ op: 'dispatch', id: 'pause', stream: 'bob/chat-0', event: { type: 'Pause', reason: 'lunch' } })).toEqual({ op: 'ack', id: 'pause', seq: 2 });
  });
});

describe('AG-UI on PostgreSQL: a message or thread id with a NUL', () => {
  it('is refused 400 with its code, and the agent takes the next message', async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const store = await postgresStore({ connectionString: POSTGRES_URL, schema });
    const engine = createEngine({ store, epics: agentEpics({ model: scriptedModel([{ text: 'Hello' }]) }) });
    const h = await startServer({ engine, routes: agUiRoutes({ engine, agents: { assistant: {} } }) });
    stop = h.stop;
    const post = (threadId: string, content: string) =>
      fetch(`${h.server.httpUrl}/agents/assistant/ag-ui`, { method: 'POST', body: JSON.stringify({ threadId, runId: 'r', messages: [{ id: 'u', role: 'user', content }] }) });
    const nul = await post('t1', 'hi\u0000there');
    expect(nul.status).toBe(400);
    expect(await nul.json()).toMatchObject({ ok: false, code: 'invalid_string', message: expect.stringMatching(/^event\.input: a string has a NUL/) });
    const thread = await post('t\u0000', 'hi');
    expect(thread.status).toBe(400);
    expect(await thread.json()).toMatchObject({ ok: false, code: 'invalid_message', message: expect.stringContaining('NUL or lone surrogate') });
    const ok = await post('t1', 'hi');
    expect(ok.status).toBe(200);
    await ok.text();
    expect((await store.read(agentStreams('conv/t1', 'assistant').turn)).slice(0, 2)).toMatchObject([{ kind: 'spawned' }, { kind: 'turn.started', event: { input: 'hi' } }]);
  });
});
