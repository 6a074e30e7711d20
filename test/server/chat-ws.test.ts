import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentEpics, chatTalk, scriptedModel } from '../../src/agents.js';
import { agentStreams, chatActorLifecycle, createEngine, type ServerMessage } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { startServer, type TestClient } from '../support/ws-client.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-chat-ws-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const USER = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const chat = agentStreams('chat/c1', 'assistant');

/** The rune of `stream` that took it from `from` to `to`, as the client sees it. */
const reached = (client: TestClient, stream: string, from: string, to: string): Promise<ServerMessage> =>
  client.find((m) => m.op === 'rune' && m.rune.stream === stream && m.rune.from === from && m.rune.to === to, `${stream}: ${from} -> ${to}`);

/** The texts of a model call's prompt, by role. */
const promptOf = (prompt: readonly { role: string; content: unknown }[]) =>
  prompt.map(({ role, content }) => [
    role,
    typeof content === 'string' ? content : (content as { type: string; text?: string }[]).map((part) => part.text ?? part.type).join(''),
  ]);

describe('a chat through the server, on a SQLite file, over WebSocket', () => {
  it('an actor runs an interaction as a turn of the chat agent; after it is cancelled a second actor answers with the first exchange in view', async () => {
    const model = scriptedModel([{ text: 'Hello, Ada.' }, { text: 'You said your name is Ada.' }]);
    const engine = createEngine({ store: sqliteStore(join(dir, 'chat.db')), epics: [chatActorLifecycle(), chatTalk(), ...agentEpics({ model })] });
    const h = await startServer({ engine });
    cleanup.push(h.stop);
    const client = await h.connect();

    const first = 'chat/c1/actor/1';
    expect(await client.request({ op: 'spawn', id: 1, stream: first, machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    client.send({ op: 'subscribe', stream: first, afterSeq: 0 });
    await client.reach(first, 1);
    expect(await client.request({ op: 'dispatch', id: 2, stream: first, event: { type: 'ProcessInteraction', userId: USER, message: 'I am Ada.' } })).toMatchObject({
      op: 'ack',
    });

    // running, then idle again: the interaction completed with success.
    expect(await reached(client, first, 'idle', 'running')).toMatchObject({ rune: { event: { type: 'ProcessInteraction', message: 'I am Ada.' } } });
    expect(await reached(client, first, 'running', 'idle')).toMatchObject({ rune: { event: { type: 'InteractionComplete', success: true } } });

    // The chat agent's turn answered.
    client.send({ op: 'subscribe', stream: chat.turn, afterSeq: 0 });
    expect(await client.find((m) => m.op === 'rune' && m.rune.stream === chat.turn && m.rune.kind === 'turn.completed', 'the turn completed')).toMatchObject({
      rune: { payload: { finalOutput: 'Hello, Ada.' } },
    });
    expect(client.runes(chat.turn).find((rune) => rune.kind === 'turn.started')).toMatchObject({ payload: { input: 'I am Ada.' } });

    // The actor is cancelled; the chat goes on with a second actor, which sees the first exchange.
    expect(await client.request({ op: 'dispatch', id: 3, stream: first, event: { type: 'Cancel', reason: 'user_cancelled' } })).toMatchObject({ op: 'ack' });
    await reached(client, first, 'idle', 'cancelled');
    const second = 'chat/c1/actor/2';
    expect(await client.request({ op: 'spawn', id: 4, stream: second, machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    client.send({ op: 'subscribe', stream: second, afterSeq: 0 });
    await client.reach(second, 1);
    expect(await client.request({ op: 'dispatch', id: 5, stream: second, event: { type: 'ProcessInteraction', userId: USER, message: 'What is my name?' } })).toMatchObject({
      op: 'ack',
    });
    expect(await reached(client, second, 'running', 'idle')).toMatchObject({ rune: { event: { type: 'InteractionComplete', success: true } } });
    expect(
      await client.find((m) => m.op === 'rune' && m.rune.stream === chat.turn && m.rune.kind === 'turn.completed' && m.rune.payload?.finalOutput !== 'Hello, Ada.'),
    ).toMatchObject({ rune: { payload: { finalOutput: 'You said your name is Ada.' } } });

    expect(model.doStreamCalls).toHaveLength(2);
    expect(promptOf(model.doStreamCalls[1]!.prompt).filter(([role]) => role !== 'system')).toEqual([
      ['user', 'I am Ada.'],
      ['assistant', 'Hello, Ada.'],
      ['user', 'What is my name?'],
    ]);
  });
});
