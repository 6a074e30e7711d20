import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, firstValueFrom, skip } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentEpics, chatTalk, scriptedModel, sendChatMessage, type ScriptEntry } from '../../src/agents.js';
import { agentStreams, chatActorLifecycle, checkInvariants, createEngine, type ChatActorState, type Engine, type Rune, type TurnEngineState } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-chat-talk-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

const USER = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const chat = agentStreams('chat/c1', 'assistant');
let files = 0;

function chatEngine(script: readonly ScriptEntry[]) {
  const model = scriptedModel(script);
  const store = sqliteStore(join(dir, `chat-${++files}.db`));
  const engine = createEngine({ store, epics: [chatActorLifecycle(), chatTalk(), ...agentEpics({ model })] });
  engines.push(engine);
  return { engine, model, store };
}

const actorState = (engine: Engine, actor: string, value: string): Promise<ChatActorState> =>
  firstValueFrom(engine.state$<ChatActorState>(actor).pipe(filter((s) => s.value === value)));

/** Resolves at the turn's `n`-th streamed delta (subscribe before the message is sent: the turn stream may not exist yet). */
const nthDelta = (engine: Engine, n: number): Promise<Rune> =>
  firstValueFrom(
    engine.runes$().pipe(
      filter((r) => r.stream === chat.turn && r.kind === 'turn.assistant_delta'),
      skip(n - 1),
    ),
  );

/** The text of every user and assistant message in a model call's prompt, in order. */
const promptText = (model: ReturnType<typeof scriptedModel>, call: number): string[] =>
  model.doStreamCalls[call]!.prompt.flatMap((m) => (m.role === 'system' ? [] : m.content.flatMap((part) => (part.type === 'text' ? [`${m.role}: ${part.text}`] : []))));

describe('chatTalk: a chat actor that talks (seed 000 on seed 003 turns)', () => {
  it("runs the user's message as a turn of the chat's agent and completes the interaction with its end", async () => {
    const { engine, store } = chatEngine([{ text: 'Hello there.' }]);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'hi' });
    expect(sent).toEqual({ actor: 'chat/c1/actor/1', accepted: true });

    const idle = await actorState(engine, sent.actor, 'idle');
    expect(idle.userId).toBe(USER);
    const turn = await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    expect(turn).toMatchObject({ input: 'hi', output: 'Hello there.' });
    // The turn stream was spawned naming the chat's agent: its turn.started says whose turn it is.
    const started = (await store.read(chat.turn)).find((rune) => rune.kind === 'turn.started');
    expect(started?.payload).toEqual({ turnId: '1', agentId: chat.agentId, input: 'hi' });
    const actorRunes = await store.read(sent.actor);
    expect(actorRunes.map((r) => r.to)).toEqual(['idle', 'running', 'idle']);
    expect(actorRunes[2]!.event).toEqual({ type: 'InteractionComplete', success: true });
    // The chat's conversation and agent were created with its first turn.
    expect((await engine.snapshot<{ value: string }>('chat/c1'))?.state.value).toBe('active');
    // The agent's lifecycle follows its turn (a step behind it): running_turn, then idle again.
    await firstValueFrom(engine.state$<{ value: string; turnId?: string }>(chat.lifecycle).pipe(filter((s) => s.value === 'idle' && s.turnId === '1')));
  });

  it("a failing turn fails the interaction: the actor ends in error with the model's error", async () => {
    const { engine } = chatEngine([{ error: 'the provider is down' }]);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'hi' });
    const ended = await actorState(engine, sent.actor, 'error');
    expect(ended.error).toContain('the provider is down');
  });

  it('Cancel mid-stream interrupts the turn with the text streamed so far; the next message goes to a fresh actor that sees the whole chat', async () => {
    const { engine, model, store } = chatEngine([{ text: 'Once upon a time', hang: true, afterDeltas: 2 }, { text: 'We talked about a story.' }]);
    const streamed = nthDelta(engine, 2);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'tell me a story' });
    await streamed;

    const interrupted = firstValueFrom(engine.runes$(chat.turn).pipe(filter((r: Rune) => r.kind === 'turn.interrupted')));
    await engine.dispatch(sent.actor, { type: 'Cancel', reason: 'user_cancelled' });
    expect((await interrupted).event).toEqual({ type: 'interrupt', reason: 'user_cancelled' });
    const turn = await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    expect(turn.output).toBe('Once upon');
    expect(model.doStreamCalls[0]!.abortSignal?.aborted).toBe(true);

    // The actor is cancelled for good (seed 000: terminal); the chat goes on with actor 2.
    expect(await engine.dispatch(sent.actor, { type: 'ProcessInteraction', userId: USER, message: 'again' })).toMatchObject({ accepted: false });
    const next = await sendChatMessage(engine, 'c1', { userId: USER, message: 'what did we talk about?' });
    expect(next).toEqual({ actor: 'chat/c1/actor/2', accepted: true });
    await actorState(engine, next.actor, 'idle');
    expect(promptText(model, 1)).toEqual(['user: tell me a story', 'assistant: Once upon', 'user: what did we talk about?']);
    // Every actor's and turn's runes are consistent with the seed-003 invariants.
    const all = [...(await store.read(chat.turn)), ...(await store.read(sent.actor)), ...(await store.read(next.actor))];
    expect(checkInvariants(all)).toEqual([]);
  });

  it('Pause interrupts the turn; a message to the paused actor resumes it and is answered', async () => {
    const { engine } = chatEngine([{ text: 'Thinking hard', hang: true, afterDeltas: 1 }, { text: 'Done now.' }]);
    const streamed = nthDelta(engine, 1);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'think' });
    await streamed;
    await engine.dispatch(sent.actor, { type: 'Pause', reason: 'lunch' });
    const paused = await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    expect(paused.reason).toBe('lunch');

    // Seed 000: paused + ProcessInteraction -> idle; the message is then processed from idle.
    const again = await sendChatMessage(engine, 'c1', { userId: USER, message: 'go on' });
    expect(again).toEqual({ actor: sent.actor, accepted: true });
    const answered = await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 2)));
    expect(answered).toMatchObject({ input: 'go on', output: 'Done now.' });
    await actorState(engine, sent.actor, 'idle');
  });

  it('after a restart mid-turn the actor is paused and its turn interrupted; the next message resumes the chat', async () => {
    const file = join(dir, 'restart.db');
    const first = createEngine({
      store: sqliteStore(file),
      epics: [chatActorLifecycle(), chatTalk(), ...agentEpics({ model: scriptedModel([{ text: 'Half an', hang: true, afterDeltas: 2 }]) })],
    });
    const streamed = nthDelta(first, 2);
    const sent = await sendChatMessage(first, 'c1', { userId: USER, message: 'long answer please' });
    await streamed;
    await first.close(); // the process goes away mid-turn

    const model = scriptedModel([{ text: 'Here it is.' }]);
    const engine = createEngine({ store: sqliteStore(file), epics: [chatActorLifecycle(), chatTalk(), ...agentEpics({ model })] });
    engines.push(engine);
    const paused = await actorState(engine, sent.actor, 'paused');
    expect(paused.reason).toBe('interrupted by restart');
    const turn = await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle')));
    expect(turn).toMatchObject({ turn: 1, output: 'Half an', reason: 'interrupted by restart' });

    expect(await sendChatMessage(engine, 'c1', { userId: USER, message: 'go on' })).toEqual({ actor: sent.actor, accepted: true });
    const answered = await firstValueFrom(engine.state$<TurnEngineState>(chat.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 2)));
    expect(answered.output).toBe('Here it is.');
    await actorState(engine, sent.actor, 'idle');
  });

  it("fails an interaction at once when the chat's agent is busy with another turn, rather than queue it unseen", async () => {
    const { engine } = chatEngine([{ text: 'Still going', hang: true, afterDeltas: 1 }]);
    const streamed = nthDelta(engine, 1);
    await engine.spawn(chat.turn, 'turn-engine');
    await engine.dispatch(chat.turn, { type: 'start_turn', input: 'a turn started elsewhere' });
    await streamed;
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'hi' });
    const failed = await actorState(engine, sent.actor, 'error');
    expect(failed.error).toBe("the chat's agent is busy (its turn is streaming)");
  });

  it('refuses a chat id that is not one segment, naming it', async () => {
    const { engine } = chatEngine([]);
    await expect(sendChatMessage(engine, 'a/b', { userId: USER, message: 'hi' })).rejects.toThrow(
      'a chat id must be 1 to 128 characters with no "/", NUL or lone surrogate, got "a/b"',
    );
  });
});
