import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { agentManagerUiFlags, type AgentManagerSessionState, type AgentManagerUiFlags } from '../../src/reducers/agent-manager-session/index.js';
import { createClient } from '../../src/server/client/index.js';
import { createServer } from '../../src/server/index.js';
import { createEngine } from '../../src/streams/engine.js';
import { valueWhere } from './fixtures.js';

/** A machine's `derive` reaches subscribers beside the state, through a real socket: computed, never stored. */
describe("a machine's derived view beside its state (an agent session's UI flags)", { timeout: 10_000 }, () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('comes with the snapshot frame as `derived`, then with each state the client folds', async () => {
    const engine = createEngine();
    cleanups.push(() => engine.close());
    const server = await createServer({ engine, port: 0 });
    cleanups.push(() => server.close());
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });

    // The raw frame, as any client (a browser without the machines) reads it.
    const socket = new WebSocket(`${server.url}`);
    cleanups.push(async () => socket.close());
    const frame = new Promise<Record<string, unknown>>((resolve) => socket.on('message', (data) => resolve(JSON.parse(String(data)) as Record<string, unknown>)));
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ op: 'subscribe', stream: 's1' }));
    expect(await frame).toMatchObject({
      op: 'snapshot',
      seq: 2,
      state: { value: 'creating' },
      derived: { showSpinner: true, showCancelButton: true, showResumeButton: false, showAutoModeWarning: true, inputEnabled: false, isActive: true },
    });

    const client = createClient({ url: server.url, WebSocket });
    cleanups.push(() => client.close());
    const creating = await valueWhere(client.derived$<AgentManagerUiFlags>('s1'), (flags) => flags !== undefined);
    expect(creating).toEqual(agentManagerUiFlags({ value: 'creating', autoApprove: true }));
    const stopped = valueWhere(client.derived$<AgentManagerUiFlags>('s1'), (flags) => flags.showResumeButton);
    await engine.dispatch('s1', { type: 'cancel_session' });
    expect(await stopped).toEqual({ showSpinner: false, showCancelButton: false, showResumeButton: true, showAutoModeWarning: false, inputEnabled: true, isActive: false });
    // Never stored: the state in the log has no flags.
    const stored = (await engine.snapshot<AgentManagerSessionState>('s1'))!.state;
    expect(Object.keys(stored)).not.toContain('showResumeButton');
  });

  it('is undefined for a machine without derive', async () => {
    const engine = createEngine();
    cleanups.push(() => engine.close());
    const server = await createServer({ engine, port: 0 });
    cleanups.push(() => server.close());
    await engine.spawn('chat-1', 'chat-actor');
    const client = createClient({ url: server.url, WebSocket });
    cleanups.push(() => client.close());
    const states = valueWhere(client.state$('chat-1'), () => true);
    const derived = valueWhere(client.derived$('chat-1'), () => true);
    await states;
    expect(await derived).toBeUndefined();
  });
});
