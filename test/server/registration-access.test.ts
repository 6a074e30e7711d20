import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type AgentRegistrationState, type ToolCallState } from '../../src/index.js';
import { agentRegistry, scriptedModel, type ProviderChain } from '../../src/agents.js';
import type { AccessAction, AccessDetails, Authorize, Verify } from '../../src/server/index.js';
import { startServer, type TestClient } from '../support/ws-client.js';

const offline: ProviderChain = { providers: [{ name: 'offline', model: scriptedModel([{ text: 'OK' }], { whenExhausted: 'cycle' }) }] };

let stop: (() => Promise<void>) | undefined;
let folder: string | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  folder = undefined;
});

/** Issue 26's frame (with a request id), its command writing `file`. */
const pwnFrame = (id: number, stream: string, file: string): string =>
  `{"op":"spawn","id":${id},"stream":"${stream}","machine":"agent-registration","input":{"name":"pwn","model":"offline","tools":["x"],"mcpServers":{"x":{"command":"sh","args":["-c","id > ${file}"]}}}}`;

const answer = (client: TestClient, id: number) => client.find((m) => (m.op === 'ack' || m.op === 'error') && m.id === id, `the answer to ${id}`);

/** Each token is one user. */
const users =
  (...names: string[]): Verify =>
  (credential) =>
    names.includes(credential.token ?? '') ? { id: credential.token! } : undefined;

describe('createServer with the agent registry: a registration from a client runs no command (issue 26, item 1)', () => {
  it('with a hook that confines bob to user/bob/*: agent-def/pwn is forbidden, user/bob/reg is invalid_stream; nothing runs', async () => {
    folder = mkdtempSync(join(tmpdir(), 'rs-registration-'));
    const pwned = join(folder, 'PWNED');
    const authorize: Authorize = (request, stream) => stream.startsWith(`user/${request.identity.id}/`);
    const h = await startServer({ verify: users('bob'), authorize }, { epics: [agentRegistry({ chains: { offline } })] });
    stop = h.stop;
    const bob = await h.connect({ headers: { authorization: 'Bearer bob' } });
    bob.send(pwnFrame(1, 'agent-def/pwn', pwned));
    expect(await answer(bob, 1)).toMatchObject({ code: 'forbidden' });
    bob.send(pwnFrame(2, 'user/bob/reg', pwned));
    expect(await answer(bob, 2)).toMatchObject({
      code: 'invalid_stream',
      message: 'an agent registration lives only at "agent-def/<name>" (its definition\'s name), not at "user/bob/reg"',
    });
    expect(await h.engine.snapshot('user/bob/reg')).toBeUndefined();
    expect(await h.engine.snapshot('agent-def/pwn')).toBeUndefined();
    expect(existsSync(pwned)).toBe(false);
  });

  it('with no hook: the registration is stored, and its checks refuse the command before anything starts (ERROR naming it); nothing runs', async () => {
    folder = mkdtempSync(join(tmpdir(), 'rs-registration-'));
    const pwned = join(folder, 'PWNED');
    const h = await startServer({}, { epics: [agentRegistry({ chains: { offline } })] });
    stop = h.stop;
    const client = await h.connect();
    client.send(pwnFrame(1, 'agent-def/pwn', pwned));
    expect(await answer(client, 1)).toMatchObject({ op: 'ack' });
    client.send({ op: 'subscribe', stream: 'agent-def/pwn' });
    const failed = await client.find(
      (m) => (m.op === 'rune' && m.rune.stream === 'agent-def/pwn' && m.rune.to === 'ERROR') || (m.op === 'snapshot' && (m.state as AgentRegistrationState).value === 'ERROR'),
      'the registration in ERROR',
    );
    expect(failed).toBeDefined();
    expect((await h.engine.snapshot<AgentRegistrationState>('agent-def/pwn'))?.state.error).toMatch(
      /^MCP server "x" is given as a command, which the configuration does not declare for agent "pwn"/,
    );
    expect(existsSync(pwned)).toBe(false);
  });

  it('tells the hook the machine of a spawn and the event type of a dispatch, so it can refuse by machine; spawnable refuses other machines with forbidden naming it', async () => {
    const asked: [string, AccessAction, AccessDetails | undefined][] = [];
    const authorize: Authorize = (_request, stream, action, details) => {
      asked.push([stream, action, details]);
      return details?.machine !== 'agent-registration';
    };
    const h = await startServer({ authorize, spawnable: ['chat-actor', 'agent-registration'] });
    stop = h.stop;
    const client = await h.connect();
    expect(await client.request({ op: 'spawn', id: 1, stream: 'agent-def/a', machine: 'agent-registration', input: { name: 'a', model: 'offline' } })).toMatchObject({
      code: 'forbidden',
    });
    expect(await client.request({ op: 'spawn', id: 2, stream: 'chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    expect(await client.request({ op: 'dispatch', id: 3, stream: 'chat', event: { type: 'Ping' } })).toMatchObject({ op: 'ack' });
    expect(await client.request({ op: 'spawn', id: 4, stream: 'call', machine: 'tool-call', input: { callId: 'c', toolName: 't', arguments: {} } })).toEqual({
      op: 'error',
      id: 4,
      stream: 'call',
      code: 'forbidden',
      message: 'clients of this server may not spawn machine "tool-call": the machines they may spawn are chat-actor, agent-registration (spawnable)',
    });
    expect(asked).toEqual([
      ['agent-def/a', 'drive', { machine: 'agent-registration' }],
      ['chat', 'drive', { machine: 'chat-actor' }],
      ['chat', 'drive', { event: 'Ping' }],
    ]);
  });
});

describe('createServer: approvals that gate (issue 26, item 6)', () => {
  /** A tool call waiting for approval. */
  const awaiting = async (h: Awaited<ReturnType<typeof startServer>>, stream: string): Promise<void> => {
    await h.engine.spawn(stream, 'tool-call', { callId: stream, toolName: 'rm', arguments: {} });
    await h.engine.dispatch(stream, { type: 'requires_approval' });
  };

  it('an approval is the approve action: a watcher that may drive cannot approve; the approver recorded is the identity, never what the client wrote', async () => {
    // alice may watch and drive, not approve; carol may approve.
    const authorize: Authorize = (request, _stream, action) => action !== 'approve' || request.identity.id === 'carol';
    const h = await startServer({ verify: users('alice', 'carol'), authorize });
    stop = h.stop;
    await awaiting(h, 'call-1');
    await awaiting(h, 'call-2');
    const alice = await h.connect({ headers: { authorization: 'Bearer alice' } });
    const carol = await h.connect({ headers: { authorization: 'Bearer carol' } });
    for (const [id, event] of [
      [1, { type: 'approved', approver: 'carol' }],
      [2, { type: 'denied' }],
    ] as const) {
      expect(await alice.request({ op: 'dispatch', id, stream: 'call-1', event })).toMatchObject({ code: 'forbidden', message: 'not allowed to approve stream "call-1"' });
    }
    expect((await h.engine.snapshot<ToolCallState>('call-1'))?.state.value).toBe('awaiting_approval');
    expect(await carol.request({ op: 'dispatch', id: 3, stream: 'call-1', event: { type: 'approved', approver: 'someone-else' } })).toMatchObject({ op: 'ack' });
    expect(await carol.request({ op: 'dispatch', id: 4, stream: 'call-2', event: { type: 'approved' } })).toMatchObject({ op: 'ack' });
    expect((await h.engine.snapshot<ToolCallState>('call-1'))?.state).toMatchObject({ value: 'executing', approver: 'carol' });
    expect((await h.engine.snapshot<ToolCallState>('call-2'))?.state).toMatchObject({ value: 'executing', approver: 'carol' });
  });
});
