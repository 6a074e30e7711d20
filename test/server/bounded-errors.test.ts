import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEngine, turnEngine, validateEvent } from '../../src/index.js';
import { agUiRoutes } from '../../src/server/ag-ui/ag-ui-routes.js';
import { describeIssues, MAX_NODES_CHECKED_WHOLE, parseBounded } from '../../src/reducers/validate.js';
import { startServer } from '../support/ws-client.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** A `tool_calls_received` event whose `calls` are `n` empty objects: each misses every field of a call. */
const wrongCalls = (n: number) => ({ type: 'tool_calls_received', callIds: ['c1'], calls: Array.from({ length: n }, () => ({})) });

/** An AG-UI body whose `n` messages each have a number for `id` and `role`. */
const wrongMessages = (n: number) => JSON.stringify({ threadId: 't1', runId: 'r1', messages: Array.from({ length: n }, () => ({ id: 1, role: 2 })) });

describe('validation errors: the work of describing them stops growing with the wrong elements', () => {
  it('a small wrong value is described whole (every issue counted); a large one only up to its first failing field, whatever its size', () => {
    // 20 wrong calls (25 nodes): checked whole, 60 issues (callId, toolName and arguments of each).
    const small = validateEvent(turnEngine, wrongCalls(20));
    expect(small).toMatchObject({ ok: false, code: 'invalid_event' });
    expect(small.ok === false && small.issues.length).toBe(60);
    expect(small.ok === false && small.reason).toContain('; and 55 more issues');
    // The issues materialized stay the same from 1,000 to 10,000 wrong elements (main: 3,000 and 30,000).
    const counts = [1_000, 10_000].map((n) => {
      const check = validateEvent(turnEngine, wrongCalls(n));
      return check.ok ? -1 : check.issues.length;
    });
    expect(counts).toEqual([1, 1]);
    const reasons = [1_000, 10_000].map((n) => {
      const check = validateEvent(turnEngine, wrongCalls(n));
      return check.ok ? '' : check.reason;
    });
    expect(reasons[0]).toBe(reasons[1]);
    expect(reasons[0]).toBe(
      `invalid "tool_calls_received" event: calls.0.callId: Invalid input: expected string, received undefined; maybe more (a value of over ${MAX_NODES_CHECKED_WHOLE} parts is checked only up to its first failing field)`,
    );
  });

  it('parseBounded passes what safeParse passes, with the same data, and fails what it fails', () => {
    const schema = z.object({ ids: z.array(z.string()), n: z.number().default(3) });
    expect(parseBounded(schema, { ids: ['a'] })).toEqual({ success: true, data: { ids: ['a'], n: 3 } });
    const many = { ids: Array.from({ length: 5_000 }, (_, i) => String(i)) };
    expect(parseBounded(schema, many)).toEqual(schema.safeParse(many));
    const wrong = parseBounded(schema, { ids: Array.from({ length: 5_000 }, () => 1) });
    expect(wrong).toMatchObject({ success: false, partial: true });
    expect(wrong.success === false && describeIssues(wrong.issues, wrong.partial)).toMatch(/^ids\.0: Invalid input: expected string, received number; maybe more/);
  });

  it('over the WebSocket: a dispatch of 1,000 and one of 10,000 wrong elements get the same error, of the same size', async () => {
    const h = await startServer({ heartbeatMs: 0 });
    stop = h.stop;
    await h.engine.spawn('conv/c/agent/a/turn', 'turn-engine');
    const client = await h.connect();
    const errors = [];
    for (const [id, n] of [
      [1, 1_000],
      [2, 10_000],
    ] as const) {
      errors.push(await client.request({ op: 'dispatch', id, stream: 'conv/c/agent/a/turn', event: wrongCalls(n) }));
    }
    expect(errors.map((e) => e.op === 'error' && e.code)).toEqual(['invalid_event', 'invalid_event']);
    const [a, b] = errors.map((e) => (e.op === 'error' ? e.message : ''));
    expect(a).toBe(b);
    expect(Buffer.byteLength(a!)).toBeLessThan(400);
    // The stream took nothing, and answers the next good event.
    expect(await client.request({ op: 'dispatch', id: 3, stream: 'conv/c/agent/a/turn', event: { type: 'start_turn', input: 'hi' } })).toMatchObject({ op: 'ack', seq: 2 });
  });
});

describe('validation errors: every HTTP route bounds them as the WebSocket does', () => {
  it('POST /agents/:agent/ag-ui with a ~1 MiB body of wrong messages is 400 invalid_message with a short message, the same as for 100 wrong messages', async () => {
    const engine = createEngine();
    const h = await startServer({ engine, heartbeatMs: 0, maxBodyBytes: 2 * 1024 * 1024, routes: agUiRoutes({ engine, agents: { assistant: {} } }) });
    stop = h.stop;
    const url = `${h.server.httpUrl}/agents/assistant/ag-ui`;
    const answers = [];
    for (const n of [100, 60_000]) {
      const body = wrongMessages(n);
      if (n > 100) expect(Buffer.byteLength(body)).toBeGreaterThan(1_000_000);
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      answers.push({ status: response.status, text: await response.text() });
    }
    for (const { status, text } of answers) {
      expect(status).toBe(400);
      expect(JSON.parse(text)).toMatchObject({ ok: false, code: 'invalid_message' });
      expect(Buffer.byteLength(text)).toBeLessThan(500);
    }
    // Both described by their first failing field (main: 100 and 60,000 lines, ~6 MB for the second).
    expect(JSON.parse(answers[1]!.text).message).toBe(
      `the body is not an AG-UI RunAgentInput: messages.0.id: Invalid input: expected string, received number; maybe more (a value of over ${MAX_NODES_CHECKED_WHOLE} parts is checked only up to its first failing field)`,
    );
    expect(JSON.parse(answers[0]!.text).message).toBe(JSON.parse(answers[1]!.text).message);
  });
});
