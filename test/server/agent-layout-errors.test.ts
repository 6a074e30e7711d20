import { afterEach, describe, expect, it } from 'vitest';
import { agentStreams } from '../../src/index.js';
import { startServer } from '../support/ws-client.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

describe('the protocol answers spawns outside the agent layout, and of an agent of two kinds, with their codes (issue 28 e, i)', () => {
  it('invalid_layout and agent_kind_conflict, each naming what is wrong; nothing is stored', async () => {
    const h = await startServer();
    stop = h.stop;
    const client = await h.connect();
    expect(await client.request({ op: 'spawn', id: 1, stream: 'myturn-1', machine: 'turn-engine' })).toMatchObject({
      op: 'error',
      id: 1,
      code: 'invalid_layout',
      message: expect.stringContaining('"<root>/agent/<a>/turn"'),
    });
    const agent = agentStreams('conv/c1', 'a1');
    expect(await client.request({ op: 'spawn', id: 2, stream: agent.turn, machine: 'turn-engine' })).toMatchObject({ op: 'ack', seq: 1 });
    expect(await client.request({ op: 'spawn', id: 3, stream: agent.react, machine: 'react-agent' })).toMatchObject({
      op: 'error',
      id: 3,
      code: 'agent_kind_conflict',
      message: expect.stringContaining(`"${agent.turn}" exists`),
    });
    expect(await h.engine.snapshot('myturn-1')).toBeUndefined();
    expect(await h.engine.snapshot(agent.react)).toBeUndefined();
  });
});
