import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { AgentManagerSessionState, AutonomyLoopState } from '../../src/index.js';
import { shardOf } from '../../src/postgres.js';
import { fsColdStore } from '../../src/streams/archive/fs-cold-store.js';
import { readManifest } from '../../src/streams/archive/read-archive.js';
import type { RunestreamClient } from '../../src/server/client/index.js';
import { dropSchemas } from '../support/postgres.js';
import { alive, descendants } from '../support/process-tree.js';
import { cleanUpProcesses, tempDb } from '../support/runestream-process.js';
import {
  clientOf,
  configFile,
  eventually,
  leaseOf,
  lowShardId,
  ownerAndSurvivors,
  serveCluster,
  storedKinds,
  storedSeqs,
  CLUSTER_TEST_TIMEOUT,
} from '../support/serve-cluster.js';

/**
 * Issue 15's failover of the services beyond chats and tools: real `runestream serve --store`
 * processes on one fresh schema, the owner-to-be started alone (it keeps the lowest shards) and
 * two survivors; the effect under test runs in the owner, the owner gets SIGKILL, and a survivor
 * takes the effect over by the same reconciliation as after a restart: it ends once.
 */

const cluster = serveCluster();
/** CLI processes a test saw: none may outlive it, whatever it asserted. */
const cliPids: number[] = [];
afterEach(async () => {
  await Promise.all(cluster.clients.splice(0).map((client) => client.close()));
  cleanUpProcesses();
  for (const pid of cliPids.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL');
});
afterAll(() => dropSchemas(cluster.schemas));

const FAKE_CLI = fileURLToPath(new URL('../fixtures/cli/fake-cli.mjs', import.meta.url));

/** The first state of `stream` a client sees that `test` holds (its current one included). */
const until = <S extends { value: string }>(client: RunestreamClient, stream: string, test: (state: S) => boolean): Promise<S> =>
  firstValueFrom(client.state$<S>(stream).pipe(filter(test)));

const count = (kinds: readonly string[], kind: string): number => kinds.filter((each) => each === kind).length;

/** The owner's and the survivors' clients, once the stream's shard is checked to be the owner's. */
async function ownedStream(config: string, stream: string) {
  const started = await ownerAndSurvivors(cluster, config);
  expect((await leaseOf(started.schema, shardOf(stream, 64)))?.owner).toBe(started.ownerId);
  return { ...started, client: clientOf(cluster, started.ownerUrl), watcher: clientOf(cluster, started.survivorUrls[0]!) };
}

/** The survivor now holding `stream`'s shard is one of `survivorIds`. */
const takenOver = async (schema: string, stream: string, survivorIds: readonly string[]) => expect(survivorIds).toContain((await leaseOf(schema, shardOf(stream, 64)))?.owner);

describe('runestream serve --store: kill -9 of the process running a service, a survivor takes it over once', { timeout: CLUSTER_TEST_TIMEOUT }, () => {
  it('an agent CLI session: its CLI process ends with its server, a survivor pauses the session once, and resumed there it runs to its end', async () => {
    const work = dirname(tempDb());
    // Resumed (`-T t1`), the fake CLI prints the task's end and exits.
    const resumeSteps = [{ json: { ts: 3, type: 'say', say: 'completion_result', text: 'Resumed and done.' } }, { exit: 0 }];
    const env = { FAKE_CLI_T_STEPS: JSON.stringify(resumeSteps) };
    const config = configFile({ clis: { fake: { protocol: 'ndjson', command: process.execPath, args: [FAKE_CLI], env, cwd: work } } });
    const session = lowShardId('session-');
    const { schema, owner, client, watcher, survivorIds } = await ownedStream(config, session);

    await client.spawn(session, 'agent-manager-session', { cli: 'fake', autoApprove: true });
    // The NDJSON adapter puts the prompt last, where the fake CLI reads its steps: cline's first lines, then it works on, silent.
    const steps = [{ json: { type: 'task_started', taskId: 't1' } }, { json: { ts: 1, type: 'say', say: 'api_req_started' } }, { hang: true }];
    await client.dispatch(session, { type: 'start_session', prompt: JSON.stringify(steps) });
    await until<AgentManagerSessionState>(watcher, session, (state) => state.value === 'streaming');
    // The fake itself (on Linux under unshare and its init, whose arguments name it too).
    const [cli, ...others] = descendants(owner.child.pid!).filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(`${process.execPath}\0${FAKE_CLI}\0`));
    expect(others).toEqual([]);
    cliPids.push(cli!);
    owner.child.kill('SIGKILL');

    const paused = await until<AgentManagerSessionState>(watcher, session, (state) => state.value !== 'streaming');
    expect(paused).toMatchObject({ value: 'paused', sessionId: 't1' });
    const kinds = await storedKinds(schema, session);
    expect(count(kinds, 'process_lost')).toBe(1);
    expect(kinds.at(-1)).toBe('process_lost');
    await takenOver(schema, session, survivorIds);
    // The orphaned CLI does not work on with no server to hear it: it ends with the server that ran it.
    await eventually(async () => !alive(cli!));

    // Resumed through the survivor, the session runs a new CLI process there, to its end.
    await watcher.dispatch(session, { type: 'resume_session' });
    const done = await until<AgentManagerSessionState>(watcher, session, (state) => state.value === 'completed' || state.value === 'error');
    expect(done).toMatchObject({ value: 'completed', lastText: 'Resumed and done.', exitCode: 0 });
    expect(count(await storedKinds(schema, session), 'process_lost')).toBe(1);
  });

  it('an archival run: its retry, armed in the owner, is fired by a survivor, which writes the archive once and ends the run once', async () => {
    // The cold folder is a file at first: the owner's write fails, and its retry waits 3 s.
    const config = configFile({ archival: { cold: { folder: 'cold' }, retryBaseMs: 3000 } });
    const cold = join(dirname(config), 'cold');
    writeFileSync(cold, 'not a folder');
    const conversation = lowShardId('archive/conv/arch-').slice('archive/'.length);
    const run = `archive/${conversation}`;
    const { schema, owner, ownerUrl, client, watcher, survivorIds } = await ownedStream(config, run);

    await client.spawn(conversation, 'conversation', { conversationId: conversation.slice('conv/'.length) });
    await client.dispatch(conversation, { type: 'first_message' });
    await client.dispatch(conversation, { type: 'close_requested', reason: 'done' }); // its cleanup walk closes it
    await until(watcher, conversation, (state) => state.value === 'closed');
    const closedAt = (await storedSeqs(schema, conversation)).at(-1)!;
    const response = await fetch(`${ownerUrl.replace('ws:', 'http:')}/archive/${encodeURIComponent(conversation)}`, { method: 'POST' });
    expect(await response.json()).toMatchObject({ ok: true, outcome: 'retrying', attempts: 1 });
    owner.child.kill('SIGKILL');
    rmSync(cold);

    await until(watcher, conversation, (state) => state.value === 'archived');
    await until(watcher, run, (state) => state.value === 'IDLE');
    const kinds = await storedKinds(schema, run);
    expect(kinds).toEqual(['spawned', 'start', 'serialized', 'write_failed', 'retry', 'rewrite', 'write_succeeded', 'reset']);
    expect(count(await storedKinds(schema, conversation), 'archive_requested')).toBe(1);
    // The archive holds the conversation once, through the rune that closed it.
    expect(readdirSync(join(cold, 'streams'))).toHaveLength(1);
    expect(await readManifest(fsColdStore(cold), conversation)).toMatchObject({ stream: conversation, fromSeq: 1, seq: closedAt, segments: [expect.anything()] });
    await takenOver(schema, run, survivorIds);
  });

  it('the autonomy scheduler: a blocked plan, its unresolvable deadline armed in the owner, is stopped once by a survivor', async () => {
    const tasks = [
      { id: 'draft', description: 'Draft the notes', ownerRole: 'writer' },
      { id: 'check', description: 'Check the notes', dependsOn: ['draft'], ownerRole: 'writer' },
    ];
    const config = configFile({
      models: { planning: { type: 'scripted', answers: [{ text: JSON.stringify({ tasks }) }] }, failing: { type: 'scripted', answers: [{ error: 'the model is down' }] } },
      agents: { writer: { model: 'failing', description: 'Writes.' } },
      defaultRole: 'writer',
      autonomy: { planner: 'planning', autoStart: true, maxTaskAttempts: 1, blockedTimeoutMs: 4000 },
    });
    const root = lowShardId('conv/auto-');
    const plan = `${root}/plan/p1`;
    const { schema, owner, client, watcher, survivorIds } = await ownedStream(config, plan);

    await client.spawn(plan, 'autonomy-loop', { goal: 'Release notes' });
    const blocked = await until<AutonomyLoopState>(watcher, plan, (state) => state.value === 'blocked' || state.value === 'stopped');
    expect(blocked.value).toBe('blocked');
    owner.child.kill('SIGKILL');

    const stopped = await until<AutonomyLoopState>(watcher, plan, (state) => state.value !== 'blocked');
    expect(stopped.value).toBe('stopped');
    const kinds = await storedKinds(schema, plan);
    // One task ran and failed, which blocked its dependant; one deadline fired, by the survivor.
    expect(kinds).toEqual([
      'plan.goal_received',
      'plan.created',
      'auto_start',
      'plan.task_assigned',
      'plan.task_started',
      'plan.task_completed',
      'all_runnable_blocked',
      'plan.stopped',
    ]);
    await takenOver(schema, plan, survivorIds);
  });
});
