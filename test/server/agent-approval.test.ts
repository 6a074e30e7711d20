import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../src/agents.js';
import { checkInvariants, memoryStore, type ServerMessage, agentStreams } from '../../src/index.js';
import { storeLog } from '../support/store-log.js';
import { startServer, type TestClient } from '../support/ws-client.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** A tool that needs approval, counts its runs, and holds each run until `finish()`: the call stays executing meanwhile. */
function gatedDeploy() {
  let runs = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const tool = defineTool({
    name: 'deploy',
    description: 'Deploys a service.',
    inputSchema: z.object({ service: z.string() }),
    needsApproval: true,
    execute: async ({ service }) => {
      runs++;
      await finished;
      return { deployed: service };
    },
  });
  return { tool, runs: () => runs, finish };
}

/** An engine running agents (one tool round, then an answer) behind a real server on 127.0.0.1. */
async function agentServer() {
  const deploy = gatedDeploy();
  const model = scriptedModel([{ text: 'Deploying.', toolCalls: [{ toolName: 'deploy', input: { service: 'api' }, toolCallId: 'd1' }] }, { text: 'Done.' }]);
  const store = memoryStore();
  // Each token is its holder's identity: the approver recorded is who approved.
  const h = await startServer(
    { verify: ({ token }) => (token === 'alice' || token === 'bob' ? { id: token } : undefined) },
    { store, epics: agentEpics({ model, tools: [deploy.tool] }) },
  );
  stop = h.stop;
  const as = (user: 'alice' | 'bob') => h.connect({ headers: { authorization: `Bearer ${user}` } });
  return { ...h, store, deploy, model, as };
}

const a = agentStreams('conv/c1', 'a1');
/** A rune of `stream` entering `to` (a spawn rune has no `from`: the turn's spawn enters `idle` too, and is not a finalized turn). */
const isRune =
  (stream: string, to: string) =>
  (m: ServerMessage): boolean =>
    m.op === 'rune' && m.rune.stream === stream && m.rune.to === to && m.rune.from !== undefined;
const answerTo =
  (id: string | number) =>
  (m: ServerMessage): boolean =>
    (m.op === 'ack' || m.op === 'error') && m.id === id;

/** Starts a turn from a client and waits until the model's call asks for approval; both clients then follow the call from its first rune. */
async function untilAwaitingApproval(first: TestClient, second: TestClient): Promise<void> {
  expect(await first.request({ op: 'spawn', id: 'spawn', stream: a.turn, machine: 'turn-engine' })).toEqual({ op: 'ack', id: 'spawn', seq: 1 });
  first.send({ op: 'subscribe', stream: a.turn, afterSeq: 0 });
  expect(await first.request({ op: 'dispatch', id: 'start', stream: a.turn, event: { type: 'start_turn', input: 'deploy the api' } })).toEqual({
    op: 'ack',
    id: 'start',
    seq: 2,
  });
  const round = await first.find(isRune(a.turn, 'tool_executing'), 'the tool round');
  expect(round).toMatchObject({ rune: { event: { type: 'tool_calls_received', callIds: ['d1'] } } });
  for (const client of [first, second]) client.send({ op: 'subscribe', stream: a.call('d1'), afterSeq: 0 });
  await Promise.all([first, second].map((client) => client.find(isRune(a.call('d1'), 'awaiting_approval'), 'the approval request')));
}

describe('server: approving an agent tool call over WebSocket', () => {
  it('two clients approve the same call at once: one ack, one not_allowed; the tool runs once; both see the same runes; the turn completes', async () => {
    const h = await agentServer();
    const [alice, bob] = [await h.as('alice'), await h.as('bob')];
    await untilAwaitingApproval(alice, bob);

    // Sent back to back, on two sockets: whichever the server reads first is the approval.
    alice.send({ op: 'dispatch', id: 'alice', stream: a.call('d1'), event: { type: 'approved', approver: 'alice' } });
    bob.send({ op: 'dispatch', id: 'bob', stream: a.call('d1'), event: { type: 'approved', approver: 'bob' } });
    const answers = await Promise.all([alice.find(answerTo('alice')), bob.find(answerTo('bob'))]);
    const acks = answers.filter((m) => m.op === 'ack');
    const errors = answers.filter((m) => m.op === 'error');
    expect(acks).toHaveLength(1);
    expect(acks[0]).toMatchObject({ op: 'ack', seq: 3 });
    const loser = acks[0]!.id === 'alice' ? 'bob' : 'alice';
    // The tool is still running (held by its gate): the second approval meets a call in `executing`.
    expect(errors).toEqual([{ op: 'error', id: loser, stream: a.call('d1'), code: 'not_allowed', message: 'event "approved" is not allowed in state "executing"' }]);

    h.deploy.finish();
    await Promise.all([alice, bob].map((client) => client.find(isRune(a.call('d1'), 'completed_result'), 'the tool result')));
    expect(h.deploy.runs()).toBe(1);
    expect(alice.runes(a.call('d1')).map((r) => [r.seq, r.kind, r.to])).toEqual([
      [1, 'tool.call', 'pending_call'],
      [2, 'tool.approval_requested', 'awaiting_approval'],
      [3, 'tool.approved', 'executing'],
      [4, 'tool.claimed', 'executing'], // the run's claim, before the tool starts
      [5, 'tool.result', 'completed_result'],
    ]);
    expect(alice.runes(a.call('d1'))[2]!.event).toEqual({ type: 'approved', approver: acks[0]!.id });
    expect(bob.runes(a.call('d1'))).toEqual(alice.runes(a.call('d1')));
    // Each rune says what wrote it: the approval the client, as its identity; the claim the epic; the result the tool.
    expect(alice.runes(a.call('d1')).map((r) => r.origin)).toEqual([
      { by: 'epic', epic: 'agentTurns' },
      { by: 'epic', epic: 'toolCallEffects' },
      { by: 'client', identity: acks[0]!.id },
      { by: 'epic', epic: 'toolCallEffects' },
      { by: 'tool', epic: 'toolCallEffects' },
    ]);

    // The approval carried the turn on: the model got the result and answered.
    const completed = await alice.find((m) => m.op === 'rune' && m.rune.stream === a.turn && m.rune.kind === 'turn.completed', 'the turn to complete');
    expect(completed).toMatchObject({ rune: { kind: 'turn.completed', from: 'streaming', to: 'idle' } }); // idle again with its last rune
    expect(JSON.stringify(h.model.doStreamCalls[1]!.prompt)).toContain('"deployed":"api"');
    expect(checkInvariants(await storeLog(h.store))).toEqual([]);
  });

  it('an approval for an unknown call stream gets unknown_stream; for a finished call, terminal_state', async () => {
    const h = await agentServer();
    const [alice, bob] = [await h.as('alice'), await h.as('bob')];
    expect(await alice.request({ op: 'dispatch', id: 1, stream: a.call('nope'), event: { type: 'approved' } })).toEqual({
      op: 'error',
      id: 1,
      stream: a.call('nope'),
      code: 'unknown_stream',
      message: `unknown stream "${a.call('nope')}"`,
    });

    await untilAwaitingApproval(alice, bob);
    expect(await bob.request({ op: 'dispatch', id: 2, stream: a.call('d1'), event: { type: 'approved', approver: 'bob' } })).toEqual({ op: 'ack', id: 2, seq: 3 });
    h.deploy.finish();
    await alice.find(isRune(a.turn, 'idle'), 'the turn to be finalized');
    expect(await alice.request({ op: 'dispatch', id: 3, stream: a.call('d1'), event: { type: 'approved', approver: 'alice' } })).toEqual({
      op: 'error',
      id: 3,
      stream: a.call('d1'),
      code: 'terminal_state',
      message: 'terminal state',
    });
    expect(h.deploy.runs()).toBe(1);
    expect((await h.engine.snapshot(a.call('d1')))?.seq).toBe(5); // approved, claimed, result
  });
});
