import { asyncScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { chatActor, memoryStore, type Rune } from '../../../src/index.js';
import { valueCheck, DEFAULT_VALUE_LIMITS } from '../../../src/reducers/value-limits.js';
import { spawnStream } from '../../../src/streams/engine/spawn.js';
import { engineParts } from '../../support/engine-parts.js';

const machines = { [chatActor.id]: chatActor };

/** `spawnStream` over an engine's parts on `store`, as `createEngine` calls it. */
function spawning(store = memoryStore()) {
  const parts = engineParts(store, machines);
  const spawn = (stream: string, machine: unknown, input?: unknown) =>
    spawnStream({ ...parts, scheduler: asyncScheduler, machines, checkValue: valueCheck(DEFAULT_VALUE_LIMITS) }, stream, machine as string, input);
  return { ...parts, spawn, store };
}

describe('spawnStream', () => {
  it("appends the stream's first rune (its spawn) and puts the instance in memory", async () => {
    const { spawn, homes, store } = spawning();
    const result = await spawn('chat-1', 'chat-actor');
    expect(result).toMatchObject({ accepted: true, rune: { stream: 'chat-1', seq: 1, machine: 'chat-actor', kind: 'spawned', event: { type: 'spawn' }, to: 'idle' } });
    expect(homes.get('chat-1')).toMatchObject({ seq: 1, durableSeq: 1 });
    expect((await store.read('chat-1')).map((rune: Rune) => rune.seq)).toEqual([1]);
  });

  it('refuses, appending nothing, a bad stream id, an unknown machine, an input over the limits, and a stream that exists in memory or in the store', async () => {
    const store = memoryStore();
    await store.append([{ stream: 'stored', seq: 1, machine: 'chat-actor', kind: 'spawned', event: { type: 'spawn' }, to: 'idle', at: 1 }]);
    const { spawn } = spawning(store);
    await spawn('chat-1', 'chat-actor');
    const codes = [
      await spawn('', 'chat-actor'),
      await spawn('bad\u0000id', 'chat-actor'),
      await spawn('x', 'constructor'),
      await spawn('x', 'chat-actor', { deep: JSON.parse('['.repeat(70) + ']'.repeat(70)) }),
      await spawn('chat-1', 'chat-actor'),
      await spawn('stored', 'chat-actor'),
    ].map((result) => (result.accepted ? 'accepted' : result.code));
    expect(codes).toEqual(['invalid_stream', 'invalid_stream', 'unknown_machine', 'too_deep', 'stream_exists', 'stream_exists']);
    expect(await store.head('x')).toBeUndefined();
  });
});
