import { filter, firstValueFrom } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { AgentRegistrationState, CircuitBreakerState, TurnEngineState } from '../../src/index.js';
import { shardOf } from '../../src/postgres.js';
import { dropSchemas } from '../support/postgres.js';
import { cleanUpProcesses } from '../support/runestream-process.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ScriptedReply } from '../support/chat-completions-server.js';
import { clientOf, configFile, eventually, leaseOf, lowShardId, ownerAndSurvivors, query, serveCluster, storedKinds, CLUSTER_TEST_TIMEOUT } from '../support/serve-cluster.js';

const cluster = serveCluster();
const servers: ChatCompletionsServer[] = [];
afterEach(async () => {
  await Promise.all(cluster.clients.splice(0).map((client) => client.close()));
  cleanUpProcesses();
  await Promise.all(servers.splice(0).map((server) => server.close()));
});
afterAll(() => dropSchemas(cluster.schemas));

/** A chat-completions server whose first answer streams for a minute (its caller is killed under it), and every later one is `later`. */
async function slowFirstAnswer(later: ScriptedReply): Promise<ChatCompletionsServer> {
  const slow: ScriptedReply = { deltas: Array.from({ length: 600 }, (_, i) => `word${i} `), deltaEveryMs: 100 };
  const server = await startChatCompletionsServer((_, index) => (index === 0 ? slow : later));
  servers.push(server);
  return server;
}

/** The writers (each process's engine has its own id) of `stream`'s runes of `kind`, in seq order: who did what. */
const writersOf = async (schema: string, stream: string, kind: string): Promise<string[]> =>
  (await query<{ writer: string }>(`SELECT writer FROM "${schema}".rs_runes WHERE stream = $1 AND kind = $2 ORDER BY seq`, [stream, kind])).map((row) => row.writer);

/** How many of `kinds` are `kind`. */
const count = (kinds: readonly string[], kind: string): number => kinds.filter((each) => each === kind).length;

describe('runestream serve --store: agents fail over when the process running them is killed', { timeout: CLUSTER_TEST_TIMEOUT }, () => {
  it("kill -9 of the process timing a provider's OPEN breaker: a survivor half-opens it once, at its cooldown's end", async () => {
    // A provider whose breaker stream lands in a shard the owner keeps; its model always fails, and one failure opens it.
    const breaker = lowShardId('provider/flaky-');
    const provider = breaker.slice('provider/'.length);
    const config = configFile({
      models: { [provider]: { type: 'scripted', answers: [{ error: 'upstream down' }], breaker: { failureThreshold: 1, openTimeoutMs: 4000 } } },
      chains: { shaky: { models: [provider] } },
      agents: { assistant: { model: 'shaky' } },
    });
    const { schema, owner, ownerUrl, ownerId, survivorUrls, survivorIds } = await ownerAndSurvivors(cluster, config);
    const turn = `${lowShardId('conv/breaker-', '/agent/a/turn')}/agent/a/turn`;
    for (const stream of [breaker, turn]) expect((await leaseOf(schema, shardOf(stream, 64)))?.owner).toBe(ownerId);

    const client = clientOf(cluster, ownerUrl);
    const watcher = clientOf(cluster, survivorUrls[0]!);
    await client.spawn(turn, 'turn-engine');
    await client.dispatch(turn, { type: 'start_turn', input: 'Hi' });
    // The owner's model call failed and opened the breaker (threshold 1): its cooldown clock is armed in the owner.
    await eventually(async () => (await storedKinds(schema, breaker)).includes('failure'));
    owner.child.kill('SIGKILL');

    await firstValueFrom(watcher.state$<CircuitBreakerState>(breaker).pipe(filter((state) => state.value === 'HALF_OPEN')));
    expect(await storedKinds(schema, breaker)).toEqual(['spawned', 'failure', 'open_timeout_elapsed']);
    // Fired by a survivor, not by the owner before it died.
    const [[opener], [halfOpener]] = await Promise.all([writersOf(schema, breaker, 'failure'), writersOf(schema, breaker, 'open_timeout_elapsed')]);
    expect(halfOpener).toBeTruthy();
    expect(halfOpener).not.toBe(opener);
    // Never before the cooldown the owner started ends.
    const [opened, halfOpened] = await query<{ at: number }>(`SELECT at FROM "${schema}".rs_runes WHERE stream = $1 AND kind <> 'spawned' ORDER BY seq`, [breaker]);
    expect(halfOpened!.at - opened!.at).toBeGreaterThanOrEqual(4000);
    expect(survivorIds).toContain((await leaseOf(schema, shardOf(breaker, 64)))?.owner);
  });

  it('kill -9 of the process streaming an agent turn: a survivor ends that turn once, interrupted, with no orphan call, and serves the next turn', async () => {
    const model = await slowFirstAnswer({ text: 'Back again.' });
    const config = configFile({ models: { remote: { type: 'openai-compatible', baseURL: model.baseURL, model: 'm' } }, agents: { assistant: { model: 'remote' } } });
    const { schema, owner, ownerUrl, ownerId, survivorUrls, survivorIds } = await ownerAndSurvivors(cluster, config);
    const conv = lowShardId('conv/turn-', '/agent/a/turn');
    const [turn, lifecycle] = [`${conv}/agent/a/turn`, `${conv}/agent/a`];
    expect((await leaseOf(schema, shardOf(turn, 64)))?.owner).toBe(ownerId);

    const client = clientOf(cluster, ownerUrl);
    const watcher = clientOf(cluster, survivorUrls[0]!);
    await client.spawn(turn, 'turn-engine');
    await client.dispatch(turn, { type: 'start_turn', input: 'Tell me a long story.' });
    // Mid-stream: some of the answer is durable, most of it still to come.
    await eventually(async () => count(await storedKinds(schema, turn), 'turn.assistant_delta') >= 2);
    owner.child.kill('SIGKILL');

    const ended = await firstValueFrom(watcher.state$<TurnEngineState>(turn).pipe(filter((state) => state.value === 'idle' && state.turn === 1)));
    expect(ended.reason).toBe('interrupted by restart');
    expect(ended.output).toMatch(/^word0 word1 /);
    const kinds = await storedKinds(schema, turn);
    expect(count(kinds, 'turn.interrupted')).toBe(1);
    expect(count(kinds, 'turn.completed') + count(kinds, 'turn.error')).toBe(0);
    expect(kinds.at(-1)).toBe('turn.interrupted'); // the turn's last rune: idle again with it
    const [[starter], [interrupter]] = await Promise.all([writersOf(schema, turn, 'turn.started'), writersOf(schema, turn, 'turn.interrupted')]);
    expect(interrupter).toBeTruthy();
    expect(interrupter).not.toBe(starter);
    // The agent heard of its end once (the conversation is told of none: an interrupted turn leaves its errors in a row);
    // it asked for no tool, so no call stream exists.
    await eventually(async () => (await storedKinds(schema, lifecycle)).includes('turn.interrupted'));
    expect(count(await storedKinds(schema, lifecycle), 'turn.interrupted')).toBe(1);
    expect(count(await storedKinds(schema, conv), 'turn_completed')).toBe(0);
    expect(await query(`SELECT stream FROM "${schema}".rs_streams WHERE stream LIKE $1`, [`${conv}/agent/a/call/%`])).toEqual([]);
    expect(survivorIds).toContain((await leaseOf(schema, shardOf(turn, 64)))?.owner);

    // The next message goes through a survivor, whose model call answers it.
    const answered = firstValueFrom(watcher.state$<TurnEngineState>(turn).pipe(filter((state) => state.value === 'idle' && state.turn === 2)));
    await watcher.dispatch(turn, { type: 'start_turn', input: 'Are you there?' });
    expect((await answered).output).toBe('Back again.');
    expect(model.requests).toHaveLength(2);
    const after = await storedKinds(schema, turn);
    expect([count(after, 'turn.interrupted'), count(after, 'turn.completed')]).toEqual([1, 1]);
    await eventually(async () => count(await storedKinds(schema, lifecycle), 'turn.completed') >= 1);
    expect(count(await storedKinds(schema, lifecycle), 'turn.completed')).toBe(1);
    expect(count(await storedKinds(schema, conv), 'turn_completed')).toBe(0);
  });

  it('kill -9 of the process activating an agent registration: a survivor runs its checks again and activates it once', async () => {
    // The definition's model is slow to answer its activation check the first time: the owner is killed waiting for it.
    const model = await slowFirstAnswer({ text: 'OK' });
    const config = configFile({
      models: { offline: { type: 'demo' }, checked: { type: 'openai-compatible', baseURL: model.baseURL, model: 'm' } },
      agents: { assistant: { model: 'offline' } },
      registry: { retryBaseMs: 600_000, clientRegistration: true },
    });
    const { schema, owner, ownerUrl, ownerId, survivorUrls, survivorIds } = await ownerAndSurvivors(cluster, config);
    const registration = lowShardId('agent-def/writer-');
    const name = registration.slice('agent-def/'.length);
    expect((await leaseOf(schema, shardOf(registration, 64)))?.owner).toBe(ownerId);

    const client = clientOf(cluster, ownerUrl);
    const watcher = clientOf(cluster, survivorUrls[0]!);
    await client.spawn(registration, 'agent-registration', { name, model: 'checked' });
    await eventually(async () => model.requests.length === 1); // the owner's check is waiting for the model
    expect((await firstValueFrom(watcher.state$<AgentRegistrationState>(registration))).value).toBe('ACTIVATING');
    owner.child.kill('SIGKILL');

    await firstValueFrom(watcher.state$<AgentRegistrationState>(registration).pipe(filter((state) => state.value === 'ACTIVE')));
    expect(await storedKinds(schema, registration)).toEqual(['spawned', 'register', 'init_succeeded']);
    const [[registerer], [activator]] = await Promise.all([writersOf(schema, registration, 'register'), writersOf(schema, registration, 'init_succeeded')]);
    expect(activator).toBeTruthy();
    expect(activator).not.toBe(registerer);
    // Checked again once, by the survivor: one more model call, one outcome on the provider's breaker.
    expect(model.requests).toHaveLength(2);
    await eventually(async () => (await storedKinds(schema, 'provider/checked')).includes('success'));
    expect(count(await storedKinds(schema, 'provider/checked'), 'success')).toBe(1);
    expect(survivorIds).toContain((await leaseOf(schema, shardOf(registration, 64)))?.owner);
  });
});
