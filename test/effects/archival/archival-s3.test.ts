import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archivalEpic } from '../../../src/effects/archival/archival-epic.js';
import { createEngine, memoryStore } from '../../../src/index.js';
import { archivalRoutes } from '../../../src/server/archival-routes.js';
import { readManifest } from '../../../src/streams/archive/read-archive.js';
import { s3ColdStore, type S3ColdStore } from '../../../src/streams/archive/s3-cold-store.js';
import { conversationWithTurns } from '../../support/archival-conversation.js';
import { startLocalS3, type LocalS3 } from '../../support/s3-server.js';
import { range, seqsOf, startServer } from '../../support/ws-client.js';

let s3: LocalS3;
beforeAll(async () => {
  s3 = await startLocalS3('archives');
});
afterAll(async () => {
  await s3?.close();
});

describe('archiving to an S3-compatible server (s3rver on 127.0.0.1), and reading it back through a client', () => {
  it('POST /archive/:target archives the conversation to the bucket; a WebSocket subscription and the SSE feed replay its pruned runes from there', async () => {
    const store = memoryStore();
    const cold: S3ColdStore = s3ColdStore({ bucket: s3.bucket, prefix: 'runestream/', clientConfig: s3.clientConfig });
    const engine = createEngine({ store, archive: cold, epics: [archivalEpic({ store, cold })] });
    const { server, connect, stop } = await startServer({ engine, routes: archivalRoutes({ engine, store, cold }) });
    try {
      await conversationWithTurns(engine, 'c1', 20);
      const hot = await store.read('conv/c1');
      const notFound = await fetch(`${server.httpUrl}/archive/${encodeURIComponent('conv/none')}`, { method: 'POST' });
      expect([notFound.status, await notFound.json()]).toEqual([404, { ok: false, code: 'unknown_stream', message: 'unknown stream "conv/none"' }]);

      const response = await fetch(`${server.httpUrl}/archive/${encodeURIComponent('conv/c1')}`, { method: 'POST' });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({
        ok: true,
        outcome: 'archived',
        streams: [
          { stream: 'conv/c1', seq: hot.length },
          { stream: 'conv/c1/agent/a1', seq: 2 },
        ],
      });
      expect((await cold.list('streams/')).length).toBe(4); // a segment and a manifest per stream, under the prefix
      expect((await readManifest(cold, 'conv/c1'))?.segments).toHaveLength(1);
      expect(await store.read('conv/c1/agent/a1')).toEqual([]);

      const client = await connect();
      client.send({ op: 'subscribe', stream: 'conv/c1', afterSeq: 0 });
      await client.reach('conv/c1', hot.length + 1);
      expect(seqsOf(client.runes('conv/c1'))).toEqual(range(1, hot.length + 1));
      expect(client.runes('conv/c1').slice(0, hot.length)).toEqual(hot);
      client.send({ op: 'subscribe', stream: 'conv/c1/agent/a1', afterSeq: 1 });
      await client.reach('conv/c1/agent/a1', 2);
      expect(seqsOf(client.runes('conv/c1/agent/a1'))).toEqual([2]);

      // SSE from the start: every state change, the archived ones included.
      const sse = await fetch(`${server.httpUrl}/streams/${encodeURIComponent('conv/c1/agent/a1')}/events`, { headers: { 'last-event-id': '0' } });
      const reader = sse.body!.getReader();
      let text = '';
      while (!text.includes('id: 2')) text += new TextDecoder().decode((await reader.read()).value);
      await reader.cancel();
      expect(text).toContain('"to_state":"idle"');
    } finally {
      await stop();
      await cold.close();
    }
  });
});
