import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../src/agents.js';
import { subAgentId } from '../../src/effects/agent/delegation.js';
import { agentStreams, checkInvariants, createEngine, type ServerMessage } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { storeLog } from '../support/store-log.js';
import { startServer } from '../support/ws-client.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-multi-close-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

const ROOT = agentStreams('conv/c1', 'root');
const RESEARCHER = agentStreams('conv/c1', subAgentId('root', 'd1'));
const WORKER = agentStreams('conv/c1', subAgentId('root', 'd2'));
const delegateCall = (role: string, task: string, toolCallId: string) => ({ toolName: 'delegate', input: { role, task }, toolCallId });
const isRune =
  (stream: string, to: string) =>
  (m: ServerMessage): boolean =>
    m.op === 'rune' && m.rune.stream === stream && m.rune.to === to;

describe('server: a conversation of three agents closed over WebSocket while a tool runs, on a SQLite file', () => {
  it('interrupts, cancels and terminates everything, closes with final stats, then seals the conversation and only it', async () => {
    let aborted: unknown;
    const wait = defineTool({
      name: 'wait',
      description: 'Waits until it is cancelled.',
      inputSchema: z.object({}),
      timeoutMs: Infinity,
      execute: (_input, { signal }) => new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject((aborted = signal.reason)), { once: true })),
    });
    // The lead's first call delegates twice; its second answers the turn in the other conversation.
    const lead = scriptedModel([
      { text: 'Asking two.', toolCalls: [delegateCall('researcher', 'find A', 'd1'), delegateCall('worker', 'wait for it', 'd2')] },
      { text: 'Hello from c2.' },
    ]);
    const researcher = scriptedModel([{ text: 'A is 1' }]);
    const worker = scriptedModel([{ text: 'Waiting.', toolCalls: [{ toolName: 'wait', input: {}, toolCallId: 'w1' }] }]);
    const store = sqliteStore(join(dir, 'close.db'));
    const engine = createEngine({
      store,
      epics: agentEpics({ model: lead, agents: { lead: {}, researcher: { model: researcher }, worker: { model: worker, tools: [wait] } } }),
    });
    const h = await startServer({ engine });
    stop = h.stop;
    const client = await h.connect();

    // The researcher answered and the worker's tool is running: the root's turn waits on the worker.
    const researched = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === ROOT.call('d1') && rune.to === 'completed_result')));
    const waiting = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === WORKER.call('w1') && rune.to === 'executing')));
    expect(await client.request({ op: 'spawn', id: 'root', stream: ROOT.lifecycle, machine: 'agent-lifecycle', input: { agentId: 'root', role: 'lead' } })).toMatchObject({
      op: 'ack',
    });
    expect(await client.request({ op: 'spawn', id: 'turn', stream: ROOT.turn, machine: 'turn-engine' })).toMatchObject({ op: 'ack' });
    expect(await client.request({ op: 'dispatch', id: 'start', stream: ROOT.turn, event: { type: 'start_turn', input: 'find A, and wait' } })).toMatchObject({ op: 'ack' });
    await Promise.all([researched, waiting]);

    client.send({ op: 'subscribe', stream: 'conv/c1', afterSeq: 0 });
    expect(await client.request({ op: 'dispatch', id: 'close', stream: 'conv/c1', event: { type: 'close_requested', reason: 'user left' } })).toMatchObject({
      op: 'ack',
    });
    const closed = await client.find(isRune('conv/c1', 'closed'), 'the conversation to close');
    expect(closed).toMatchObject({
      rune: { kind: 'session.closed', event: { type: 'cleanup_complete', finalStats: { agents: 3, turns: 3, toolCalls: 3, cancelledToolCalls: 2 } } },
    });
    expect(String(aborted)).toContain('conversation closing');

    // Every call terminal (the waiting one and the delegate call waiting on it cancelled), every agent terminated with its stats.
    const runes = (await storeLog(store)).filter((rune) => rune.stream.startsWith('conv/c1/') || rune.stream === 'conv/c1');
    const last = (stream: string) => runes.filter((rune) => rune.stream === stream).at(-1);
    expect([ROOT.call('d1'), ROOT.call('d2'), WORKER.call('w1')].map((stream) => last(stream)?.to)).toEqual(['completed_result', 'cancelled_result', 'cancelled_result']);
    expect(last(WORKER.call('w1'))?.event).toEqual({ type: 'cancelled', reason: 'conversation closing' });
    for (const [agent, stats] of [
      [ROOT, { turns: 1, toolCalls: 2 }],
      [RESEARCHER, { turns: 1, toolCalls: 0 }],
      [WORKER, { turns: 1, toolCalls: 1 }],
    ] as const) {
      expect(last(agent.lifecycle)).toMatchObject({ kind: 'agent.terminated', to: 'terminated', event: { type: 'parent_closed', stats } });
      expect(last(agent.turn)?.to).toBe('idle');
    }
    expect(checkInvariants(runes)).toEqual([]);

    // Sealed: a dispatch to a stream of the conversation, and a spawn under it, are refused naming the conversation.
    expect(await client.request({ op: 'dispatch', id: 'late', stream: ROOT.turn, event: { type: 'start_turn', input: 'more?' } })).toEqual({
      op: 'error',
      id: 'late',
      stream: ROOT.turn,
      code: 'sealed',
      message: `stream "${ROOT.turn}" is sealed: conversation "conv/c1" is closed`,
    });
    const late = agentStreams('conv/c1', 'late');
    expect(await client.request({ op: 'spawn', id: 'spawn-late', stream: late.turn, machine: 'turn-engine' })).toEqual({
      op: 'error',
      id: 'spawn-late',
      stream: late.turn,
      code: 'sealed',
      message: `stream "${late.turn}" is sealed: conversation "conv/c1" is closed`,
    });
    expect(await store.head(late.turn)).toBeUndefined();

    // Another conversation is not touched: its agent runs a whole turn.
    const other = agentStreams('conv/c2', 'solo');
    expect(await client.request({ op: 'spawn', id: 'c2', stream: other.turn, machine: 'turn-engine' })).toMatchObject({ op: 'ack' });
    client.send({ op: 'subscribe', stream: other.turn, afterSeq: 0 });
    expect(await client.request({ op: 'dispatch', id: 'c2-start', stream: other.turn, event: { type: 'start_turn', input: 'hello' } })).toMatchObject({ op: 'ack' });
    await client.find((m) => m.op === 'rune' && m.rune.stream === other.turn && m.rune.kind === 'turn.completed', 'the turn in conv/c2 to complete');
    expect((await engine.snapshot<{ output: string }>(other.turn))?.state.output).toBe('Hello from c2.');
  });
});
