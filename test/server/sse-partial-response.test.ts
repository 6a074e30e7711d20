import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, firstValueFrom, skip } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentEpics, chatPartialResponse, chatTalk, scriptedModel, sendChatMessage, type ScriptEntry } from '../../src/agents.js';
import { agentStreams, chatActorLifecycle, createEngine, type Engine, type TurnEngineState } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { SseClient, type SseBlock } from '../support/sse-client.js';
import { startServer } from '../support/ws-client.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-sse-partial-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const USER = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const chat = agentStreams('chat/c1', 'assistant');
let files = 0;

/** `runestream serve`'s wiring on a SQLite file: chats that talk, an agent, and the partial responses in SSE. */
async function chatServer(script: readonly ScriptEntry[]) {
  const engine = createEngine({
    store: sqliteStore(join(dir, `chat-${++files}.db`)),
    epics: [chatActorLifecycle(), chatTalk(), ...agentEpics({ model: scriptedModel(script) })],
  });
  const h = await startServer({ engine, partialResponse: chatPartialResponse(engine) });
  cleanup.push(h.stop);
  const open = async (stream: string, query = '') => {
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/${encodeURIComponent(stream)}/events${query}`);
    cleanup.push(() => sse.close());
    return sse;
  };
  return { engine, open };
}

const isStopped = (b: SseBlock) => b.kind === 'event' && b.event === 'stopped';
const deltas = (engine: Engine, n: number) =>
  firstValueFrom(
    engine.runes$().pipe(
      filter((r) => r.stream === chat.turn && r.kind === 'turn.assistant_delta'),
      skip(n - 1),
    ),
  );

describe('SSE stopped.partial_response (seed 000) from the chat agent’s turn', () => {
  it('Cancel mid-stream: stopped carries the text streamed before the stop, live and on a resume from the start', async () => {
    const { engine, open } = await chatServer([{ text: 'Once upon a time', hang: true, afterDeltas: 2 }]);
    const streamed = deltas(engine, 2);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'tell me a story' });
    const live = await open(sent.actor);
    await streamed;
    await engine.dispatch(sent.actor, { type: 'Cancel', reason: 'user_cancelled' });

    const stopped = await live.next(isStopped);
    expect(stopped).toMatchObject({ event: 'stopped', data: { reason: 'user_cancelled', partial_response: 'Once upon' } });
    const turn = await engine.snapshot<TurnEngineState>(chat.turn);
    expect(turn?.state.output).toBe('Once upon');

    // A client resuming from seq 0 long after gets every event again, the same text included.
    const replay = await open(sent.actor, '?lastEventId=0');
    await replay.next(isStopped);
    expect(replay.events.map((b) => (b.kind === 'event' ? [b.id, b.event] : []))).toEqual([
      ['2', 'state_changed'],
      ['3', 'state_changed'],
      ['3', 'stopped'],
    ]);
    expect(replay.events.at(-1)).toMatchObject({ data: { partial_response: 'Once upon' } });
  });

  it('a later interaction of the chat does not leak into an earlier actor’s stop, and an actor stopped before its turn began has none', async () => {
    const { engine, open } = await chatServer([{ text: 'Once upon a time', hang: true, afterDeltas: 2 }, { text: 'Second answer.' }]);
    const streamed = deltas(engine, 2);
    const first = await sendChatMessage(engine, 'c1', { userId: USER, message: 'tell me a story' });
    await streamed;
    await engine.dispatch(first.actor, { type: 'Error', error: 'the user left' });
    await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    const second = await sendChatMessage(engine, 'c1', { userId: USER, message: 'again' });
    expect(second.actor).toBe('chat/c1/actor/2');
    await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 2)));

    const earlier = await open(first.actor, '?lastEventId=0');
    expect(await earlier.next(isStopped)).toMatchObject({ data: { reason: 'error', partial_response: 'Once upon' } });

    // An actor that never ran: its stop is not from `running`, so there is no text to wait for.
    await engine.spawn('chat/c2/actor/1', 'chat-actor');
    await engine.dispatch('chat/c2/actor/1', { type: 'Cancel', reason: 'user_cancelled' });
    const idleStop = await open('chat/c2/actor/1', '?lastEventId=0');
    expect(await idleStop.next(isStopped)).toMatchObject({ data: { reason: 'user_cancelled', partial_response: '' } });
  });
});
