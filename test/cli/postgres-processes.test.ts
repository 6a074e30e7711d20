import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import type { RunestreamClient } from '../../src/server/client/index.js';
import { shardOf } from '../../src/postgres.js';
import { POSTGRES_URL, dropSchemas, postgresUrlVia } from '../support/postgres.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { LISTENING, cleanUpProcesses, tempDb } from '../support/runestream-process.js';
import {
  clientOf,
  configFile,
  eventually,
  freshSchema,
  leaseOf,
  lowShardId,
  ownerAndSurvivors,
  ownerOf,
  query,
  serveCluster,
  serveOn,
  storedKinds,
  storedSeqs,
  CLUSTER_TEST_TIMEOUT,
} from '../support/serve-cluster.js';

const cluster = serveCluster();
afterEach(async () => {
  await Promise.all(cluster.clients.splice(0).map((client) => client.close()));
  cleanUpProcesses();
});
afterAll(() => dropSchemas(cluster.schemas));

/** `n` `runestream serve --store` processes on one fresh schema, started at once (their migrations race), each with a client. */
async function processes(n: number) {
  const schema = freshSchema(cluster);
  const config = configFile();
  const started = Array.from({ length: n }, () => serveOn(POSTGRES_URL, schema, config));
  const urls = await Promise.all(started.map(async (cli) => (await cli.line(LISTENING))[1]!));
  return { schema, config, processes: started, clients: urls.map((url) => clientOf(cluster, url)) };
}

/** Every seq `client` hears on `stream` from now on, once it is subscribed (its first state came). */
async function heard(client: RunestreamClient, stream: string): Promise<number[]> {
  const seqs: number[] = [];
  client.runes$(stream).subscribe((rune: Rune) => seqs.push(rune.seq));
  await firstValueFrom(client.state$(stream));
  return seqs;
}

const until = (seqs: number[], seq: number) =>
  new Promise<void>((resolve) => {
    const check = () => (seqs.includes(seq) ? resolve() : setTimeout(check, 20));
    check();
  });

/** `promise`, or a failure naming `what` after `ms`. */
const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref())]);

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('runestream serve --store: 3 processes on one PostgreSQL log', { timeout: CLUSTER_TEST_TIMEOUT }, () => {
  it('dispatches from all three to the same streams interleave with no gap and no duplicate, every subscriber on every process sees seqs 1..N once, and each runs its own metrics collector', async () => {
    const {
      schema,
      config,
      clients: [a, b, c],
    } = await processes(3);
    const streams = ['chat/s1', 'chat/s2'];
    for (const stream of streams) await a!.spawn(stream, 'chat-actor');
    const subscribers = await Promise.all([a!, b!, c!].flatMap((client) => streams.map((stream) => heard(client, stream))));
    const PINGS = 20;
    // Every client pings every stream at once: the processes race for each next seq.
    const acknowledged = await Promise.all(
      [a!, b!, c!].flatMap((client) => streams.flatMap((stream) => range(1, PINGS).map(() => client.dispatch(stream, { type: 'Ping' })))),
    );
    const last = 1 + 3 * PINGS;
    for (const stream of streams) {
      const seqs = acknowledged.filter((_, i) => streams[Math.floor(i / PINGS) % streams.length] === stream).map((ack) => ack.seq);
      expect([...seqs].sort((x, y) => x - y)).toEqual(range(2, last));
      expect(await storedSeqs(schema, stream)).toEqual(range(1, last));
    }
    await Promise.all(subscribers.map((seqs) => until(seqs, last)));
    for (const seqs of subscribers) expect(seqs).toEqual(range(2, last));
    // Each process runs a metrics collector of its own, on its own stream, writing its own file.
    const collectors = async () => query<{ value: string }>(`SELECT value FROM "${schema}".rs_streams WHERE stream LIKE 'metrics/collector/%'`);
    await eventually(async () => (await collectors()).filter((row) => row.value === 'RUNNING').length === 3);
    await eventually(async () => readdirSync(dirname(config)).filter((name) => /^metrics-\d+\.json$/.test(name)).length === 3);
  });

  it('kill -9 of one process under load: no acknowledged rune lost, no gap, no duplicate; the others carry on', async () => {
    const {
      schema,
      processes: [, , doomed],
      clients: [a, b, c],
    } = await processes(3);
    const stream = 'chat/load';
    await a!.spawn(stream, 'chat-actor');
    const acknowledged: number[] = [];
    const ping = async (client: RunestreamClient, times: number): Promise<void> => {
      for (let i = 0; i < times; i++) {
        try {
          acknowledged.push((await client.dispatch(stream, { type: 'Ping' })).seq);
        } catch (error) {
          // A clean refusal appended nothing; the killed process's client loses its answers: neither was acknowledged.
          if ((error as { code?: string }).code === 'contention') continue;
          if (client !== c) throw error;
          return;
        }
      }
    };
    const load = Promise.all([ping(a!, 40), ping(b!, 40), ping(c!, 1000)]);
    await until(acknowledged, 30);
    doomed!.child.kill('SIGKILL');
    await load;
    const stored = await storedSeqs(schema, stream);
    expect(stored).toEqual(range(1, stored.length));
    for (const seq of acknowledged) expect(stored).toContain(seq);
    expect(new Set(acknowledged).size).toBe(acknowledged.length);
    // The survivors still serve the stream.
    const { seq } = await b!.dispatch(stream, { type: 'Ping' });
    expect(seq).toBe(stored.length + 1);
  });

  // Retried once: under the full suite's load it has hung twice in a dozen CI runs (not seen alone or
  // under local load); each step now fails naming itself, so the next hang says where.
  it('a process cut off from the database loses its shards to a survivor, and its late write, held in the network meanwhile, is refused by fencing', {
    retry: 1,
  }, async () => {
    const schema = freshSchema(cluster);
    const config = configFile();
    const proxy = await tcpProxy();
    try {
      // The cut-off-to-be starts alone, so it holds every shard; the survivor then takes a fair share of the highest ones.
      const doomed = serveOn(postgresUrlVia(proxy.port), schema, config, 1000);
      const [, doomedUrl] = await doomed.line(LISTENING);
      const doomedOwner = await ownerOf(doomed);
      const survivor = serveOn(POSTGRES_URL, schema, config, 1000);
      const [, survivorUrl] = await survivor.line(LISTENING);
      const survivorOwner = await ownerOf(survivor);
      const stream = Array.from({ length: 100 }, (_, i) => `chat/fenced-${i}`).find((id) => shardOf(id, 64) < 16)!;
      const shard = shardOf(stream, 64);
      await eventually(async () => (await query(`SELECT 1 FROM "${schema}".rs_leases WHERE owner = $1`, [survivorOwner])).length > 0, 'the survivor holding a lease');
      const before = await leaseOf(schema, shard);
      expect(before?.owner).toBe(doomedOwner);

      const [cutOff, other] = [clientOf(cluster, doomedUrl!), clientOf(cluster, survivorUrl!)];
      await cutOff.spawn(stream, 'chat-actor');
      expect(await storedSeqs(schema, stream)).toEqual([1]);

      proxy.hold();
      // Sent while it still owns the shard, under its epoch: the append waits in the network.
      const late = cutOff.dispatch(stream, { type: 'Ping' }).then(
        () => 'accepted',
        (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
      );
      await eventually(async () => (await leaseOf(schema, shard))?.owner === survivorOwner, `the survivor owning shard ${shard} of the cut-off process`);
      const after = await leaseOf(schema, shard);
      expect(after!.epoch).toBeGreaterThan(before!.epoch);
      proxy.release();
      expect(await within(late, 30_000, 'the late write refused after the partition')).toMatch(
        new RegExp(`shard-${shard}.*epoch ${before!.epoch} is fenced off by epoch ${after!.epoch}`),
      );
      expect(await storedSeqs(schema, stream)).toEqual([1]);
      // The survivor serves the stream.
      expect(await other.dispatch(stream, { type: 'Ping' })).toEqual({ seq: 2 });
    } finally {
      await proxy.close();
    }
  });

  it('kill -9 of the process that owns the streams: a survivor takes over their armed inactivity timer and approval timeout, each firing once', async () => {
    const config = configFile({ chats: { inactivityTimeoutMs: 4000 }, toolCalls: { approvalTimeoutMs: 4000 } });
    const { schema, owner, ownerUrl, ownerId, survivorUrls, survivorIds } = await ownerAndSurvivors(cluster, config);
    const chat = lowShardId('chat/timer-');
    const call = `${lowShardId('conv/approval-', '/agent/a/call/c1')}/agent/a/call/c1`;
    for (const stream of [chat, call]) expect((await leaseOf(schema, shardOf(stream, 64)))?.owner).toBe(ownerId);

    const client = clientOf(cluster, ownerUrl);
    const watcher = clientOf(cluster, survivorUrls[0]!);
    await client.spawn(chat, 'chat-actor'); // idle: its inactivity clock is armed in the owner
    await client.spawn(call, 'tool-call', { callId: 'c1', toolName: 'save_note', arguments: { text: 'hello' } });
    await firstValueFrom(watcher.state$<{ value: string }>(call).pipe(filter((state) => state.value === 'awaiting_approval')));
    owner.child.kill('SIGKILL');

    const ended = (stream: string, value: string) => firstValueFrom(watcher.state$<{ value: string }>(stream).pipe(filter((state) => state.value === value)));
    await Promise.all([ended(chat, 'completed'), ended(call, 'timeout_result')]);
    expect(await storedKinds(schema, chat)).toEqual(['spawned', 'InactivityTimeout']);
    expect((await storedKinds(schema, call)).filter((kind) => kind === 'tool.result')).toHaveLength(1);
    // Taken over by a survivor.
    for (const stream of [chat, call]) expect(survivorIds).toContain((await leaseOf(schema, shardOf(stream, 64)))?.owner);
  });

  it('kill -9 of the process running a tool: its side effect (a line appended to a file) happens once; a survivor ends the claimed call once, never running it again', async () => {
    const sideEffects = join(dirname(tempDb()), 'side-effects.log');
    const mcpServer = fileURLToPath(new URL('../fixtures/mcp/server.ts', import.meta.url));
    // The fixture's `slow` tool appends "slow started" to MCP_FIXTURE_LOG, then runs for a while.
    const files = { command: process.execPath, args: ['--import', 'tsx', mcpServer], env: { MCP_FIXTURE_LOG: sideEffects } };
    const config = configFile({ agents: { assistant: { model: 'offline', tools: ['files'], mcpServers: { files } } } });
    const { schema, owner, ownerUrl, ownerId, survivorUrls, survivorIds } = await ownerAndSurvivors(cluster, config);
    const call = `${lowShardId('conv/tool-', '/agent/a/call/c1')}/agent/a/call/c1`;
    expect((await leaseOf(schema, shardOf(call, 64)))?.owner).toBe(ownerId);

    const client = clientOf(cluster, ownerUrl);
    const watcher = clientOf(cluster, survivorUrls[0]!);
    await client.spawn(call, 'tool-call', { callId: 'c1', toolName: 'files__slow', arguments: { steps: 1000, stepMs: 50 } });
    await eventually(async () => existsSync(sideEffects) && readFileSync(sideEffects, 'utf8').includes('slow started'));
    owner.child.kill('SIGKILL');

    const ended = await firstValueFrom(watcher.state$<{ value: string; error?: string }>(call).pipe(filter((state) => state.value === 'error_result')));
    expect(ended.error).toMatch(/interrupted/);
    const kinds = await storedKinds(schema, call);
    expect(kinds.filter((kind) => kind === 'tool.claimed')).toHaveLength(1);
    expect(kinds.filter((kind) => kind === 'tool.result')).toHaveLength(1);
    expect(
      readFileSync(sideEffects, 'utf8')
        .split('\n')
        .filter((line) => line === 'slow started'),
    ).toHaveLength(1);
    expect(survivorIds).toContain((await leaseOf(schema, shardOf(call, 64)))?.owner);
  });

  it('a connection lost under a dispatch: it is written whole or not at all, the dispatcher is told which, and the next one goes through', async () => {
    const schema = freshSchema(cluster);
    const proxy = await tcpProxy();
    try {
      const cli = serveOn(postgresUrlVia(proxy.port), schema, configFile());
      const [, url] = await cli.line(LISTENING);
      const client = clientOf(cluster, url!);
      const stream = 'chat/cut';
      await client.spawn(stream, 'chat-actor');
      proxy.hold();
      const lost = client.dispatch(stream, { type: 'Ping' }).then(
        () => 'accepted',
        (error: { code?: string; message?: string }) => `${error.code}: ${error.message}`,
      );
      await new Promise((resolve) => setTimeout(resolve, 200)); // the append is on the wire, held
      proxy.cut(); // the connection dies under it
      proxy.release();
      // Whole or not at all, and the dispatcher is told which: a connection that died before the
      // append reached the database is replaced and the append goes through; one that died under it
      // refuses the dispatch (its transaction never committed).
      const outcome = await lost;
      const stored = await storedSeqs(schema, stream);
      if (outcome === 'accepted') expect(stored).toEqual([1, 2]);
      else {
        expect(outcome).toMatch(/^\w+: .*(connection|unavailable|terminated)/i);
        expect(stored).toEqual([1]);
      }
      expect(await client.dispatch(stream, { type: 'Ping' })).toEqual({ seq: stored.length + 1 });
      expect(await storedSeqs(schema, stream)).toEqual(range(1, stored.length + 1));
    } finally {
      await proxy.close();
    }
  });
});
