import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runePayloadSchemas, toolCall } from '../../src/index.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { startServer } from '../support/ws-client.js';

let dir: string;
let stop: (() => Promise<void>) | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runestream-ws-payload-'));
});
afterEach(async () => {
  await stop?.();
  stop = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe('server: a rune on the WebSocket protocol carries its payload', () => {
  it('live and replayed from a SQLite file, each valid by its kind, with no payload key where the kind has none', async () => {
    const h = await startServer({}, { store: sqliteStore(join(dir, 'runes.db')) });
    stop = h.stop;
    const live = await h.connect();
    const input = { callId: 'k1', toolName: 'shell', arguments: { cmd: 'ls' } };
    expect(await live.request({ op: 'spawn', id: 1, stream: 'conv/c1/call/k1', machine: 'tool-call', input })).toEqual({ op: 'ack', id: 1, seq: 1 });
    live.send({ op: 'subscribe', stream: 'conv/c1/call/k1', afterSeq: 0 });
    await live.reach('conv/c1/call/k1', 1);
    for (const [id, event] of [
      [2, { type: 'requires_approval', policyReason: 'runs a command' }],
      [3, { type: 'approved', approver: 'ana' }], // recorded as the connection's identity's
      [4, { type: 'success', output: 'a.txt' }],
    ] as const) {
      expect(await live.request({ op: 'dispatch', id, stream: 'conv/c1/call/k1', event })).toEqual({ op: 'ack', id, seq: id });
    }
    await live.reach('conv/c1/call/k1', 4);
    const expected = [
      { seq: 1, kind: 'tool.call', payload: input },
      { seq: 2, kind: 'tool.approval_requested', payload: { callId: 'k1', policyReason: 'runs a command' } },
      { seq: 3, kind: 'tool.approved', payload: { callId: 'k1', approver: 'anonymous' } },
      { seq: 4, kind: 'tool.result', payload: { callId: 'k1', status: 'success', output: 'a.txt' } },
    ];
    expect(live.runes('conv/c1/call/k1')).toMatchObject(expected);

    // A client that comes later gets them replayed from the file, payloads included.
    const late = await h.connect();
    late.send({ op: 'subscribe', stream: 'conv/c1/call/k1', afterSeq: 0 });
    await late.reach('conv/c1/call/k1', 4);
    expect(late.runes('conv/c1/call/k1')).toEqual(live.runes('conv/c1/call/k1'));
    const schemas = runePayloadSchemas(toolCall);
    for (const rune of late.runes('conv/c1/call/k1')) expect(schemas[rune.kind as keyof typeof schemas].safeParse(rune.payload).success).toBe(true);

    await h.engine.spawn('conv/c1/call/k2', toolCall, { ...input, callId: 'k2' });
    late.send({ op: 'subscribe', stream: 'conv/c1/call/k2', afterSeq: 0 });
    await late.request({ op: 'dispatch', id: 'n', stream: 'conv/c1/call/k2', event: { type: 'no_approval_needed' } });
    await late.reach('conv/c1/call/k2', 2);
    expect(Object.hasOwn(late.runes('conv/c1/call/k2')[1]!, 'payload')).toBe(false);
  });
});
