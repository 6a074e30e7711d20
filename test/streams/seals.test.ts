import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';

const CONV = 'conv/c1';
const AGENT = 'conv/c1/agent/a1';

/** A conversation with one agent, closed: its `cleanup_complete` seals what is under it. */
async function closedConversation(engine: Engine): Promise<void> {
  await engine.spawn(CONV, 'conversation', { conversationId: 'c1' });
  await engine.spawn(AGENT, 'agent-lifecycle', { agentId: 'a1' });
  await engine.dispatch(AGENT, { type: 'init_complete' });
  await engine.dispatch(CONV, { type: 'agent_ready', rootAgentId: 'a1' });
  await engine.dispatch(CONV, { type: 'close_requested', reason: 'done' });
  // Closing, not sealed yet: the agents are still terminated.
  expect(await engine.dispatch(AGENT, { type: 'parent_closed' })).toMatchObject({ accepted: true });
  expect(await engine.dispatch(CONV, { type: 'cleanup_complete', finalStats: { agents: 1 } })).toMatchObject({ accepted: true });
}

const sealedReason = (stream: string) => `stream "${stream}" is sealed: conversation "conv/c1" is closed`;

describe('engine: sealing the streams under a closed conversation', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses every spawn and dispatch under conv/<c> once it is closed, with code sealed naming the conversation', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    await engine.spawn('conv/c2', 'conversation', { conversationId: 'c2' });
    // A stream in memory that took events before the seal: it is refused after it all the same.
    const turn = `${AGENT}/turn`;
    await engine.spawn(turn, 'turn-engine');
    expect(await engine.dispatch(turn, { type: 'start_turn', input: 'hi' })).toMatchObject({ accepted: true });
    await closedConversation(engine);
    expect(await engine.dispatch(turn, { type: 'assistant_delta', content: 'late' })).toEqual({ accepted: false, code: 'sealed', reason: sealedReason(turn) });
    const head = await store.head(AGENT);
    expect(await engine.dispatch(AGENT, { type: 'kill' })).toEqual({ accepted: false, code: 'sealed', reason: sealedReason(AGENT) });
    expect(await engine.spawn(`${CONV}/agent/a2`, 'agent-lifecycle', { agentId: 'a2' })).toEqual({
      accepted: false,
      code: 'sealed',
      reason: sealedReason(`${CONV}/agent/a2`),
    });
    expect(await engine.spawn(`${CONV}/agent/a2/turn`, 'turn-engine')).toMatchObject({ code: 'sealed' });
    expect(await store.head(AGENT)).toEqual(head);
    expect(await store.head(`${CONV}/agent/a2`)).toBeUndefined();
    // The conversation itself takes only archive_requested (its machine's rule), then stays sealed.
    expect(await engine.dispatch(CONV, { type: 'new_turn' })).toMatchObject({ accepted: false, code: 'not_allowed' });
    expect(await engine.dispatch(CONV, { type: 'archive_requested' })).toMatchObject({ accepted: true });
    expect(await engine.dispatch(AGENT, { type: 'kill' })).toEqual({
      accepted: false,
      code: 'sealed',
      reason: `stream "${AGENT}" is sealed: conversation "conv/c1" is archived`,
    });
    expect(await engine.dispatch(turn, { type: 'assistant_delta', content: 'later' })).toMatchObject({
      code: 'sealed',
      reason: `stream "${turn}" is sealed: conversation "conv/c1" is archived`,
    });
    // Other conversations, and a stream that only shares a prefix of the id, are not sealed.
    expect(await engine.spawn('conv/c2/agent/a1', 'agent-lifecycle', { agentId: 'a1' })).toMatchObject({ accepted: true });
    expect(await engine.spawn('conv/c10/agent/a1', 'agent-lifecycle', { agentId: 'a1' })).toMatchObject({ accepted: true });
    await engine.close();
  });

  it('knows a seal after a restart from the stored head, before and without the conversation in memory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runestream-seals-'));
    dirs.push(dir);
    const path = join(dir, 'seals.db');
    const first = createEngine({ store: sqliteStore(path) });
    await closedConversation(first);
    await first.close();

    const store = sqliteStore(path);
    const second = createEngine({ store });
    expect(second.size).toBe(0);
    expect(await second.dispatch(AGENT, { type: 'kill' })).toEqual({ accepted: false, code: 'sealed', reason: sealedReason(AGENT) });
    expect(second.size).toBe(1); // the agent's lifecycle: the conversation was read by its head only
    expect(await second.spawn(`${CONV}/agent/a1/call/x`, 'tool-call', { callId: 'x', toolName: 't', arguments: {} })).toMatchObject({ code: 'sealed' });
    await second.close();
  });

  it('costs nothing for machines that seal nothing: an engine hosting none never reads an ancestor', async () => {
    const store = memoryStore();
    let heads = 0;
    const counting = { ...store, head: (stream: string) => (heads++, store.head(stream)) };
    const engine = createEngine({ store: counting, machines: { 'agent-lifecycle': (await import('../../src/reducers/agent-lifecycle/machine.js')).agentLifecycle } });
    await engine.spawn(AGENT, 'agent-lifecycle', { agentId: 'a1' });
    expect(heads).toBe(1); // its own head, none of conv/ or conv/c1
    await engine.close();
  });
});
