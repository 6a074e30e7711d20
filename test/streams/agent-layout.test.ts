import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { agentStreams } from '../../src/reducers/stream-ids.js';
import { createEngine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';

const agent = agentStreams('conv/c1', 'a1');

describe('engine: agents live only in the agent layout (invalid_layout)', () => {
  it.each(['myturn-1', 'conv/x/agent/a/b/turn', 'conv/x/agent/a', 'conv/x/agent/a/react'])(
    'refuses a turn-engine at "%s", naming the layout; nothing is stored',
    async (stream) => {
      const store = memoryStore();
      const engine = createEngine({ store });
      const result = await engine.spawn(stream, 'turn-engine');
      expect(result).toMatchObject({ accepted: false, code: 'invalid_layout' });
      expect(!result.accepted && result.reason).toContain('"<root>/agent/<a>/turn"');
      expect(!result.accepted && result.reason).toContain(`not at "${stream}"`);
      expect(await store.head(stream)).toBeUndefined();
      // Nothing was claimed either: a dispatch finds no stream.
      expect(await engine.dispatch(stream, { type: 'start_turn', input: 'hi' })).toMatchObject({ accepted: false, code: 'unknown_stream' });
      await engine.close();
    },
  );

  it.each(['myagent', 'conv/x/agent/a/turn', 'conv/x'])('refuses an agent-lifecycle at "%s" (no turn stream could ever ready it), naming the layout', async (stream) => {
    const store = memoryStore();
    const engine = createEngine({ store });
    const result = await engine.spawn(stream, 'agent-lifecycle', { agentId: 'a' });
    expect(result).toMatchObject({ accepted: false, code: 'invalid_layout' });
    expect(!result.accepted && result.reason).toContain('"<root>/agent/<a>"');
    expect(await store.head(stream)).toBeUndefined();
    await engine.close();
  });

  it('accepts both in the layout, under a conversation or a chat', async () => {
    const engine = createEngine();
    for (const root of ['conv/c1', 'chat/h1']) {
      const { lifecycle, turn } = agentStreams(root, 'a1');
      expect(await engine.spawn(lifecycle, 'agent-lifecycle', { agentId: 'a1' })).toMatchObject({ accepted: true });
      expect(await engine.spawn(turn, 'turn-engine')).toMatchObject({ accepted: true });
    }
    await engine.close();
  });
});

describe('engine: an agent id has one kind (agent_kind_conflict)', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  const kinds = [
    { first: agent.turn, firstMachine: 'turn-engine', second: agent.react, secondMachine: 'react-agent' },
    { first: agent.react, firstMachine: 'react-agent', second: agent.turn, secondMachine: 'turn-engine' },
  ] as const;

  it.each(kinds)(
    'refuses $secondMachine where the same agent has a $firstMachine, naming the stream that exists; nothing is stored',
    async ({ first, firstMachine, second, secondMachine }) => {
      const store = memoryStore();
      const engine = createEngine({ store });
      expect(await engine.spawn(first, firstMachine)).toMatchObject({ accepted: true });
      const result = await engine.spawn(second, secondMachine);
      expect(result).toMatchObject({ accepted: false, code: 'agent_kind_conflict' });
      expect(!result.accepted && result.reason).toContain(`"${first}" exists`);
      expect(await store.head(second)).toBeUndefined();
      expect(await engine.dispatch(second, { type: 'turn_finalized' })).toMatchObject({ accepted: false, code: 'unknown_stream' });
      // Another agent of the conversation may be of the other kind.
      expect(await engine.spawn(agentStreams('conv/c1', 'a2').react, 'react-agent')).toMatchObject({ accepted: true });
      await engine.close();
    },
  );

  it.each(kinds)('refuses $secondMachine after a restart, the $firstMachine only in the SQLite store', async ({ first, firstMachine, second, secondMachine }) => {
    const dir = mkdtempSync(join(tmpdir(), 'runestream-agent-kind-'));
    dirs.push(dir);
    const path = join(dir, 'log.db');
    const before = createEngine({ store: sqliteStore(path) });
    expect(await before.spawn(first, firstMachine)).toMatchObject({ accepted: true });
    await before.close();

    const store = sqliteStore(path);
    const after = createEngine({ store });
    const result = await after.spawn(second, secondMachine);
    expect(result).toMatchObject({ accepted: false, code: 'agent_kind_conflict' });
    expect(!result.accepted && result.reason).toContain(`"${first}" exists`);
    expect(await store.head(second)).toBeUndefined();
    await after.close();
  });

  it('of two spawns of both kinds at once, exactly one is made', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    const [turn, react] = await Promise.all([engine.spawn(agent.turn, 'turn-engine'), engine.spawn(agent.react, 'react-agent')]);
    expect(turn).toMatchObject({ accepted: true });
    expect(react).toMatchObject({ accepted: false, code: 'agent_kind_conflict' });
    expect(await store.head(agent.react)).toBeUndefined();
    await engine.close();
  });
});
