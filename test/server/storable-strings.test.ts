import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { postgresStore } from '../../src/postgres.js';
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
