import { filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentStreams, conversation, ConversationEvent, type ConversationState, type TurnEngineState } from '../../../src/index.js';
import { agentEpics, InvalidOptionError, scriptedModel } from '../../../src/agents.js';
import { createEngine, type Engine } from '../../../src/streams/engine.js';
import { memoryStore } from '../../../src/streams/memory-store.js';
import { ServerConfigError, parseServerConfig } from '../../../src/server/config/server-config.js';
import { quiet } from '../../support/virtual-time.js';

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

const agent = agentStreams('conv/c1', 'a1');

/** An engine running agents on a model that fails but for the calls (from 1) in `succeeds`. */
function start(errorThreshold: number | undefined, succeeds: readonly number[] = []) {
  const model = scriptedModel(Array.from({ length: 10 }, (_, i) => (succeeds.includes(i + 1) ? { text: 'ok' } : { error: `provider down (call ${i + 1})` })));
  const store = memoryStore();
  const engine = createEngine({ store, epics: agentEpics({ model, ...(errorThreshold === undefined ? {} : { errorThreshold }) }) });
  engines.push(engine);
  let runes = 0;
  engine.runes$().subscribe(() => runes++);
  return { engine, store, settled: () => quiet(() => runes) };
}

/** Starts turn `n` and waits until it has ended. */
async function turn(engine: Engine, n: number): Promise<TurnEngineState> {
  const done = firstValueFrom(engine.state$<TurnEngineState>(agent.turn).pipe(filter((s) => s.value === 'idle' && s.turn === n)));
  await engine.dispatch(agent.turn, { type: 'start_turn', input: `try ${n}` });
  return done;
}

const talk = async (engine: Engine): Promise<ConversationState> => (await engine.snapshot<ConversationState>(agent.root))!.state;

describe('conversation errors: error_threshold (issue 28 f)', () => {
  it('six failing turns: the fifth error in a row suspends the conversation (error_threshold), the sixth is refused saying why', async () => {
    const { engine, store, settled } = start(undefined);
    await engine.spawn(agent.turn, 'turn-engine');
    for (let n = 1; n <= 5; n++) expect((await turn(engine, n)).value).toBe('idle');
    await settled();
    expect((await talk(engine)).value).toBe('suspended');
    expect(await talk(engine)).toMatchObject({ value: 'suspended', consecutiveErrors: 5, reason: '5 turns in a row ended in error (errorThreshold 5)' });
    expect((await turn(engine, 6)).reason).toBe('the conversation is suspended: 5 turns in a row ended in error (errorThreshold 5)');

    const runes = await store.read(agent.root);
    const ends = runes.filter((rune) => rune.kind === 'turn_completed').map((rune) => rune.event);
    expect(ends).toHaveLength(5);
    expect(ends.every((event) => (event as { outcome?: string }).outcome === 'error')).toBe(true);
    expect(runes.filter((rune) => rune.kind === 'session.suspended').map((rune) => [rune.event.type, rune.payload])).toEqual([
      ['error_threshold', { reason: '5 turns in a row ended in error (errorThreshold 5)' }],
    ]);
    // An operator's reset makes it active again, the count cleared.
    await engine.dispatch(agent.root, { type: 'reset' });
    expect(await talk(engine)).toMatchObject({ value: 'active' });
    expect((await talk(engine)).consecutiveErrors).toBeUndefined();
  });

  it('a completed turn in between starts the count again', async () => {
    const { engine, settled } = start(3, [3]);
    await engine.spawn(agent.turn, 'turn-engine');
    for (let n = 1; n <= 5; n++) await turn(engine, n); // error, error, ok, error, error
    await settled();
    expect(await talk(engine)).toMatchObject({ value: 'active', consecutiveErrors: 2 });
    await turn(engine, 6); // the third error in a row
    await settled();
    expect(await talk(engine)).toMatchObject({ value: 'suspended', reason: '3 turns in a row ended in error (errorThreshold 3)' });
  });

  it('agentEpics and the configuration file refuse an errorThreshold out of range, with a code', () => {
    const model = scriptedModel([{ text: 'hi' }]);
    for (const errorThreshold of [0, -1, 2.5, 1001]) {
      expect(() => agentEpics({ model, errorThreshold })).toThrow(InvalidOptionError);
      expect(() => agentEpics({ model, errorThreshold })).toThrow(expect.objectContaining({ code: 'invalid_option', option: 'errorThreshold' }));
    }
    expect(() => agentEpics({ model, errorThreshold: 0 })).toThrow('agentEpics: "errorThreshold" Too small: expected number to be >=1, got 0');
    const config = { models: { m: { type: 'demo' } }, agents: { a: { model: 'm' } }, defaultRole: 'a' };
    expect(parseServerConfig(JSON.stringify({ ...config, errorThreshold: 3 }), 'x').errorThreshold).toBe(3);
    expect(() => parseServerConfig(JSON.stringify({ ...config, errorThreshold: 0 }), 'runestream.json')).toThrow(
      expect.objectContaining({ code: 'config_invalid', message: 'runestream.json: errorThreshold: Too small: expected number to be >=1' }),
    );
    expect(() => parseServerConfig(JSON.stringify({ ...config, errorThreshold: 0 }), 'x')).toThrow(ServerConfigError);
  });
});

describe('conversation: turn_completed outcome', () => {
  const active = conversation.transition(conversation.initial({ conversationId: 'c1' }), { type: 'first_message' });
  it('a turn_completed with no outcome (as older logs have it) parses, and counts as completed', () => {
    expect(ConversationEvent.parse({ type: 'turn_completed' })).toEqual({ type: 'turn_completed' });
    const failed = conversation.transition(active, { type: 'turn_completed', outcome: 'error' });
    expect(failed.consecutiveErrors).toBe(1);
    expect(conversation.transition(failed, { type: 'turn_completed' }).consecutiveErrors).toBeUndefined();
  });

  it('errors count up, an interrupted turn leaves the count, a completed one clears it', () => {
    let s = active;
    for (const outcome of ['error', 'interrupted', 'error'] as const) s = conversation.transition(s, { type: 'turn_completed', outcome });
    expect(s.consecutiveErrors).toBe(2);
    s = conversation.transition(s, { type: 'turn_completed', outcome: 'completed' });
    expect(s.consecutiveErrors).toBeUndefined();
  });
});
