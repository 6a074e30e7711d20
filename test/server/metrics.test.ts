import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import parsePrometheusTextFormat, { type PrometheusFamily } from 'parse-prometheus-text-format';
import { filter, mergeMap, throwError } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../src/agents.js';
import { agentStreams, memoryStore, type Epic, type ServerMessage } from '../../src/index.js';
import { createMetrics, OTHER_LABEL_VALUE, type RunestreamMetrics } from '../../src/server/index.js';
import { SseClient, fetchJson } from '../support/sse-client.js';
import { startServer } from '../support/ws-client.js';

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

/** GET `path` on a real socket: status, content type and body. */
function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; contentType: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Every family of a scrape by name. */
const familiesOf = (text: string): Map<string, PrometheusFamily> => new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family]));

/** The value of the series of `family` with exactly these labels (the parser gives numbers as strings). */
function valueOf(families: Map<string, PrometheusFamily>, family: string, labels: Record<string, string> = {}): number | undefined {
  const same = (given: Readonly<Record<string, string>> = {}): boolean =>
    Object.keys(given).length === Object.keys(labels).length && Object.entries(labels).every(([name, value]) => given[name] === value);
  const found = families.get(family)?.metrics.find((m) => same(m.labels));
  return found?.value === undefined ? undefined : Number(found.value);
}

/** The `_count` of a histogram's series, read from the text (the parser drops a labelled histogram's count). */
function countOf(text: string, family: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${family}_count${labels === '' ? ' ' : `{${labels}} `}`));
  return Number(line?.split(' ').at(-1));
}

/** A tool that needs approval: the turn waits for an operator's `approved`. */
const deploy = defineTool({
  name: 'deploy',
  description: 'Deploys a service.',
  inputSchema: z.object({ service: z.string() }),
  needsApproval: true,
  execute: async ({ service }) => ({ deployed: service }),
});

/** An epic that fails on any rune of `break/...`: the engine reports it and resubscribes it later. */
const brokenEpic: Epic = function brokenEpic(runes$) {
  return runes$.pipe(
    filter((rune) => rune.stream.startsWith('break/')),
    mergeMap(() => throwError(() => new Error('broken on purpose'))),
  );
};

async function metricsServer(metrics: RunestreamMetrics, options: Parameters<typeof startServer>[0] = {}) {
  const model = scriptedModel(
    [
      { text: 'Deploying.', toolCalls: [{ toolName: 'deploy', input: { service: 'api' }, toolCallId: 'd1' }], usage: { inputTokens: 11, outputTokens: 5 } },
      { text: 'Done.', usage: { inputTokens: 20, outputTokens: 2 } },
    ],
    { modelId: 'scripted-gpt' },
  );
  const h = await startServer(
    { metrics, ...options },
    { store: memoryStore(), epics: [...agentEpics({ model: { providers: [{ name: 'primary', model }] }, tools: [deploy] }), brokenEpic] },
  );
  const stop = metrics.observe(h.engine);
  cleanups.push(h.stop, stop);
  return h;
}

const a = agentStreams('conv/c1', 'a1');
const entering = (stream: string, to: string) => (m: ServerMessage) => m.op === 'rune' && m.rune.stream === stream && m.rune.to === to && m.rune.from !== undefined;

describe('GET /metrics', () => {
  it('after a scripted agent turn over a real socket, every family is there with sane values (Prometheus text, parsed)', async () => {
    const metrics = createMetrics();
    const h = await metricsServer(metrics);
    const client = await h.connect();
    expect(await client.request({ op: 'spawn', id: 's', stream: a.turn, machine: 'turn-engine' })).toMatchObject({ op: 'ack' });
    client.send({ op: 'subscribe', stream: a.turn, afterSeq: 0 });
    expect(await client.request({ op: 'dispatch', id: 'go', stream: a.turn, event: { type: 'start_turn', input: 'deploy the api' } })).toMatchObject({ op: 'ack' });
    client.send({ op: 'subscribe', stream: a.call('d1'), afterSeq: 0 });
    await client.find(entering(a.call('d1'), 'awaiting_approval'), 'the approval request');
    expect(await client.request({ op: 'dispatch', id: 'ok', stream: a.call('d1'), event: { type: 'approved', approver: 'ops' } })).toMatchObject({ op: 'ack' });
    await client.find((m) => m.op === 'rune' && m.rune.stream === a.turn && m.rune.kind === 'turn.completed' && m.rune.event.type === 'response_done', 'the final answer');
    // A rejection, a hydration (a released stream read back), and an SSE reader left open.
    expect(await client.request({ op: 'dispatch', id: 'bad', stream: a.turn, event: { type: 'no_such_event' } })).toMatchObject({ op: 'error', code: 'unknown_event' });
    h.engine.release(a.call('d1'));
    await h.engine.snapshot(a.call('d1'));
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/${encodeURIComponent(a.turn)}/events`);
    cleanups.push(() => void sse.response.destroy());
    await h.engine.spawn('break/1', 'chat-actor');
    // Many dispatches, so the sampled dispatch latency (one in 64) has some.
    await h.engine.spawn('chat/1', 'chat-actor');
    for (let i = 0; i < 200; i++) expect(await h.engine.dispatch('chat/1', { type: 'Ping' })).toMatchObject({ accepted: true });

    const scrape = await get(`${h.server.httpUrl}/metrics`);
    expect(scrape.status).toBe(200);
    expect(scrape.contentType).toBe(metrics.registry.contentType);
    const families = familiesOf(scrape.body);

    expect([...families.keys()].sort()).toEqual([
      'runestream_breaker_state',
      'runestream_dispatch_duration_seconds',
      'runestream_dispatch_rejections_total',
      'runestream_epic_failures_total',
      'runestream_hydration_duration_seconds',
      'runestream_instances_in_memory',
      'runestream_model_calls_total',
      'runestream_model_first_delta_seconds',
      'runestream_model_tokens_total',
      'runestream_runes_appended_total',
      'runestream_sse_readers',
      'runestream_store_append_duration_seconds',
      'runestream_tool_approval_wait_seconds',
      'runestream_tool_executions_total',
      'runestream_ws_connections',
      'runestream_ws_slow_clients_total',
      'runestream_ws_subscriptions',
    ]);
    expect(valueOf(families, 'runestream_runes_appended_total', { machine: 'turn-engine', kind: 'turn.started' })).toBe(1);
    expect(valueOf(families, 'runestream_runes_appended_total', { machine: 'tool-call', kind: 'tool.result' })).toBe(1);
    // Two calls answered; the second's success changed nothing on the breaker, so only the first is a rune.
    expect(valueOf(families, 'runestream_runes_appended_total', { machine: 'circuit-breaker', kind: 'success' })).toBe(1);
    expect(countOf(scrape.body, 'runestream_dispatch_duration_seconds', 'machine="chat-actor"')).toBeGreaterThanOrEqual(3);
    expect(valueOf(families, 'runestream_dispatch_rejections_total', { code: 'unknown_event' })).toBeGreaterThanOrEqual(1);
    expect(valueOf(families, 'runestream_instances_in_memory')).toBeGreaterThan(0);
    expect(countOf(scrape.body, 'runestream_hydration_duration_seconds', 'machine="tool-call"')).toBeGreaterThanOrEqual(1);
    expect(countOf(scrape.body, 'runestream_store_append_duration_seconds')).toBeGreaterThan(0);
    expect(valueOf(families, 'runestream_ws_connections')).toBe(1);
    expect(valueOf(families, 'runestream_ws_subscriptions')).toBe(2);
    expect(valueOf(families, 'runestream_ws_slow_clients_total', { policy: 'coalesce' })).toBe(0);
    expect(valueOf(families, 'runestream_sse_readers')).toBe(1);
    expect(valueOf(families, 'runestream_model_calls_total', { provider: 'primary', outcome: 'success' })).toBe(2);
    expect(countOf(scrape.body, 'runestream_model_first_delta_seconds')).toBe(2);
    expect(valueOf(families, 'runestream_model_tokens_total', { model: 'scripted-gpt', direction: 'input' })).toBe(31);
    expect(valueOf(families, 'runestream_model_tokens_total', { model: 'scripted-gpt', direction: 'output' })).toBe(7);
    expect(valueOf(families, 'runestream_tool_executions_total', { tool: 'deploy', status: 'success' })).toBe(1);
    expect(countOf(scrape.body, 'runestream_tool_approval_wait_seconds')).toBe(1);
    expect(valueOf(families, 'runestream_breaker_state', { provider: 'primary', state: 'CLOSED' })).toBe(1);
    expect(valueOf(families, 'runestream_breaker_state', { provider: 'primary', state: 'OPEN' })).toBe(0);
    expect(valueOf(families, 'runestream_epic_failures_total', { epic: 'brokenEpic', type: 'epic_failed' })).toBeGreaterThanOrEqual(1);
    // No stream id is ever a label value.
    expect(scrape.body).not.toContain('conv/c1');
  });

  it('is behind the access checks: 401 without the token', async () => {
    const h = await metricsServer(createMetrics(), { token: 'secret' });
    expect((await fetchJson(`${h.server.httpUrl}/metrics`)).status).toBe(401);
    expect((await get(`${h.server.httpUrl}/metrics`, { authorization: 'Bearer secret' })).status).toBe(200);
  });

  it('a scrape while the server shuts down is answered 503 unavailable, not left hanging', async () => {
    // The scrape's access check waits until the test lets it go; meanwhile the server starts closing.
    let admit!: () => void;
    let asked!: () => void;
    const checking = new Promise<void>((resolve) => (asked = resolve));
    const release = new Promise<void>((resolve) => (admit = resolve));
    const h = await metricsServer(createMetrics(), {
      verify: async (credential) => {
        if (credential.token === 'scraper') {
          asked();
          await release;
        }
        return { id: credential.token ?? 'anonymous' };
      },
    });
    // A WebSocket peer that never answers the close handshake holds the shutdown open (ws waits for its close frame).
    const holder = await silentWebSocket(h.server.port);
    cleanups.push(() => void holder.destroy());
    const scrape = get(`${h.server.httpUrl}/metrics`, { authorization: 'Bearer scraper' });
    await checking;
    const closing = h.server.close();
    await once(holder, 'data'); // the close frame: shutdown is under way
    admit();
    const answer = await scrape;
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toEqual({ ok: false, code: 'unavailable', message: 'the server is closing; scrape again once it is back' });
    holder.destroy();
    await closing;
  });

  it('caps each label at maxLabelValues distinct values; the rest count as "other"', async () => {
    const metrics = createMetrics({ maxLabelValues: 3 });
    const h = await startServer({ metrics }); // no epics: the calls move only as this test says
    cleanups.push(h.stop, metrics.observe(h.engine));
    // Ten tool calls, each naming another tool, each ending in an error.
    for (let i = 0; i < 10; i++) {
      const stream = `calls/t${i}`;
      expect(await h.engine.spawn(stream, 'tool-call', { callId: `t${i}`, toolName: `tool_${i}`, arguments: {} })).toMatchObject({ accepted: true });
      expect(await h.engine.dispatch(stream, { type: 'no_approval_needed' })).toMatchObject({ accepted: true });
      expect(await h.engine.dispatch(stream, { type: 'execution_error', error: 'boom' })).toMatchObject({ accepted: true });
    }
    const families = familiesOf((await get(`${h.server.httpUrl}/metrics`)).body);
    const tools = families.get('runestream_tool_executions_total')!.metrics.map((m) => m.labels?.tool);
    expect(tools).toEqual(['tool_0', 'tool_1', 'tool_2', OTHER_LABEL_VALUE]);
    expect(valueOf(families, 'runestream_tool_executions_total', { tool: OTHER_LABEL_VALUE, status: 'error' })).toBe(7);
  });

  it('cuts each label value to maxLabelLength, keeping long names apart by a hash: 20 tools and 20 models of 250,000 characters make a small scrape', async () => {
    expect(() => createMetrics({ maxLabelLength: 15 })).toThrow('createMetrics: "maxLabelLength" must be at least 16 (room for a hash), got 15');
    const metrics = createMetrics({ maxLabelLength: 32 });
    const h = await startServer({ metrics });
    cleanups.push(h.stop, metrics.observe(h.engine));
    // Names that differ only at their end, past any cut.
    const long = (prefix: string, i: number): string => `${prefix.repeat(250_000)}${i}`;
    for (let i = 0; i < 20; i++) {
      const calls = `calls/t${i}`;
      expect(await h.engine.spawn(calls, 'tool-call', { callId: `t${i}`, toolName: long('t', i), arguments: {} })).toMatchObject({ accepted: true });
      expect(await h.engine.dispatch(calls, { type: 'no_approval_needed' })).toMatchObject({ accepted: true });
      expect(await h.engine.dispatch(calls, { type: 'execution_error', error: 'boom' })).toMatchObject({ accepted: true });
      const turn = `conv/t${i}/agent/a/turn`;
      expect(await h.engine.spawn(turn, 'turn-engine')).toMatchObject({ accepted: true });
      expect(await h.engine.dispatch(turn, { type: 'start_turn', input: 'hi' })).toMatchObject({ accepted: true });
      expect(await h.engine.dispatch(turn, { type: 'response_done', model: long('m', i), usage: { inputTokens: 1 } })).toMatchObject({ accepted: true });
    }
    const scrape = (await get(`${h.server.httpUrl}/metrics`)).body;
    expect(scrape.length).toBeLessThan(64 * 1024); // main: over 10 MB
    const families = familiesOf(scrape);
    const tools = families.get('runestream_tool_executions_total')!.metrics.map((m) => m.labels!.tool!);
    const models = families.get('runestream_model_tokens_total')!.metrics.map((m) => m.labels!.model!);
    for (const [names, prefix] of [
      [tools, 't'],
      [models, 'm'],
    ] as const) {
      expect(new Set(names).size).toBe(20);
      for (const name of names) expect(name).toMatch(new RegExp(`^${prefix}{23}…[0-9a-f]{8}$`));
    }
  });

  it('refuses a metrics option that is not createMetrics()', async () => {
    await expect(startServer({ metrics: {} as RunestreamMetrics })).rejects.toThrow('createServer: "metrics" must be what createMetrics() returns');
  });
});

/** Completes a WebSocket handshake by hand, then reads nothing and answers nothing. */
async function silentWebSocket(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(
    `GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
  const [head] = (await once(socket, 'data')) as [Buffer];
  expect(head.toString()).toMatch(/^HTTP\/1.1 101/);
  socket.on('error', () => undefined);
  return socket;
}
