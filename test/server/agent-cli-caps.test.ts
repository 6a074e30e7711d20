import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentCliSessions, cliSessionOwners } from '../../src/agents.js';
import { createEngine, type AgentManagerSessionState, type Engine } from '../../src/index.js';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { createServer, type RunestreamServer } from '../../src/server/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { event, fakeAdapter, fakeSpec } from '../effects/cli/support.js';

/**
 * Issue 26 item 5: "one client started 300 CLI processes". Agent CLI sessions behind a real server
 * on 127.0.0.1, on a SQLite file, each run a real process of the fake CLI; three identities (one
 * token each, through `verify`); the caps are small: 2 processes in all, 1 per identity.
 */

const dir = mkdtempSync(join(tmpdir(), 'runestream-cli-caps-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let engine: Engine | undefined;
let server: RunestreamServer | undefined;
const clients: RunestreamClient[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
  await server?.close();
  await engine?.close(); // ends the sessions' processes
  engine = server = undefined;
});

const TOKENS: Readonly<Record<string, string>> = { 'ann-token': 'ann', 'bob-token': 'bob', 'cat-token': 'cat' };

/** A fake CLI that creates its session and then runs until it is ended. */
const running = () =>
  fakeAdapter({ interactive: false, script: () => [event({ type: 'session_created', sessionId: 't' }), event({ type: 'api_req_started', ts: 1 }), { hang: true }] });

async function serveCapped(adapter: ReturnType<typeof running>) {
  const owners = cliSessionOwners();
  engine = createEngine({
    store: sqliteStore(join(dir, `caps-${Date.now()}-${Math.random()}.db`)),
    epics: [agentCliSessions({ clis: { fake: fakeSpec(adapter, { killGraceMs: 200 }) }, maxRunningSessions: 2, maxSessionsPerIdentity: 1, owners })],
  });
  server = await createServer({
    engine,
    port: 0,
    verify: ({ token }) => (token !== undefined && Object.hasOwn(TOKENS, token) ? { id: TOKENS[token]! } : undefined),
    onDrive: owners.driven,
  });
  const as = (token: string) => {
    const client = createClient({ url: server!.url, token, WebSocket });
    clients.push(client);
    return client;
  };
  return { ann: as('ann-token'), bob: as('bob-token'), cat: as('cat-token') };
}

/** The session's first state that matches, as the client sees it. */
const until = (client: RunestreamClient, stream: string, match: (state: AgentManagerSessionState) => boolean) =>
  firstValueFrom(client.state$<AgentManagerSessionState>(stream).pipe(filter(match)));

/** Spawns a session and starts it, as `client`; resolves with the state it settles in (streaming or error). */
async function start(client: RunestreamClient, stream: string) {
  await client.spawn(stream, 'agent-manager-session', { cli: 'fake', autoApprove: true });
  await client.dispatch(stream, { type: 'start_session', prompt: 'go' });
  return until(client, stream, (s) => s.value === 'streaming' || s.value === 'error');
}

describe('agent CLI sessions: the caps on running processes (maxRunningSessions, maxSessionsPerIdentity)', () => {
  it('one identity runs at most 1 process, all together at most 2; a refused session is error too_many_sessions with no process; a freed slot is taken by retry', async () => {
    const adapter = running();
    const { ann, bob, cat } = await serveCapped(adapter);

    expect((await start(ann, 'ann/1')).value).toBe('streaming');
    expect(adapter.runs).toHaveLength(1);

    // Ann's second session: her one process runs already.
    const annSecond = await start(ann, 'ann/2');
    expect(annSecond.value).toBe('error');
    expect(annSecond.error).toMatch(/^too_many_sessions: "ann" runs 1 agent CLI sessions now, at most 1 per identity \(maxSessionsPerIdentity\)/);
    expect(adapter.runs).toHaveLength(1); // nothing was started

    // Bob is someone else: his first process runs.
    expect((await start(bob, 'bob/1')).value).toBe('streaming');
    expect(adapter.runs).toHaveLength(2);

    // Cat has none running, but two run in all.
    const catFirst = await start(cat, 'cat/1');
    expect(catFirst.value).toBe('error');
    expect(catFirst.error).toMatch(/^too_many_sessions: 2 agent CLI sessions run now, at most 2 at once \(maxRunningSessions\)/);
    expect(adapter.runs).toHaveLength(2);

    // Ann ends hers: her retry takes the slot.
    await ann.dispatch('ann/1', { type: 'cancel_session' });
    await until(ann, 'ann/1', (s) => s.value === 'stopped');
    await ann.dispatch('ann/2', { type: 'retry' });
    await until(ann, 'ann/2', (s) => s.value === 'streaming');
    expect(adapter.runs).toHaveLength(3);

    // Cat's retry is refused again (ann/2 and bob/1 run), and starts nothing.
    const again = firstValueFrom(engine!.runes$().pipe(filter((rune) => rune.stream === 'cat/1' && rune.kind === 'process_error')));
    await cat.dispatch('cat/1', { type: 'retry' });
    expect(((await again).event as { error?: unknown }).error).toMatch(/^too_many_sessions: .*\(maxRunningSessions\)/);
    expect(adapter.runs).toHaveLength(3);
  });

  it('a session counts towards the identity whose start_session started its process, not the one that spawned it', async () => {
    const adapter = running();
    const { ann, bob } = await serveCapped(adapter);
    await ann.spawn('shared', 'agent-manager-session', { cli: 'fake', autoApprove: true });
    await bob.dispatch('shared', { type: 'start_session', prompt: 'go' });
    expect((await until(bob, 'shared', (s) => s.value === 'streaming' || s.value === 'error')).value).toBe('streaming');
    // Bob's one slot is held by it; ann's is free.
    expect((await start(bob, 'bob/1')).error).toMatch(/"bob" runs 1 .*\(maxSessionsPerIdentity\)/);
    expect((await start(ann, 'ann/1')).value).toBe('streaming');
    expect(adapter.runs).toHaveLength(2);
  });
});
