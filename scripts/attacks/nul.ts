/**
 * Issue 26, item 2: requests with `\u0000` (and lone surrogates) against a server on PostgreSQL
 * while other users spawn and dispatch. On main one such rune failed the whole commit batch, and
 * with it every other caller's dispatch in it.
 *
 *   npx tsx -e "const { attacks } = await import('./scripts/attacks/nul.ts'); await attacks.nul();"
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { agentEpics, scriptedModel } from '../../src/agents.js';
import { createEngine } from '../../src/index.js';
import { postgresStore } from '../../src/postgres.js';
import { Client, report, serve, sleep, tally, userId } from './kit.js';

const POSTGRES_URL = process.env.RUNESTREAM_ATTACK_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test';
const ATTACK_MS = 5_000;
const NUL_REQUESTS = 35;
const USERS = 15;
const BYSTANDER_SPAWNS = 300;
/** How long one request may go unanswered before its turn counts as wedged. */
const ANSWER_MS = 10_000;

/** The attacker's frames, as raw JSON text: a NUL in a value, a lone surrogate in a key, a NUL in a spawn input. */
const nulFrame = (i: number): string =>
  [
    `{"op":"dispatch","id":"nul-${i}","stream":"mallory/chat","event":{"type":"Pause","reason":"lunch\\u0000${i}"}}`,
    `{"op":"dispatch","id":"nul-${i}","stream":"mallory/chat","event":{"type":"Pause","reason":"lunch","k\\ud800":${i}}}`,
    `{"op":"spawn","id":"nul-${i}","stream":"mallory/call-${i}","machine":"tool-call","input":{"callId":"c","toolName":"t","arguments":{"q":"a\\u0000"}}}`,
  ][i % 3]!;

/** One request's answer (`ack` or an error code), or `unanswered` after {@link ANSWER_MS}. */
async function ask(client: Client, message: { id: string } & Record<string, unknown>): Promise<string> {
  client.send(message);
  const answer = await client.find((m) => m.id === message.id, ANSWER_MS);
  return answer === undefined ? 'unanswered' : (answer.message.code ?? answer.message.op);
}

/** How many of `stream`'s turns `client` saw end (their `turn.completed`, `turn.error` or `turn.interrupted` runes). */
const turnsEnded = (client: Client, stream: string): number =>
  client.received.filter(({ message }) => {
    const { rune } = message as { rune?: { stream: string; kind: string } };
    return rune?.stream === stream && ['turn.completed', 'turn.error', 'turn.interrupted'].includes(rune.kind);
  }).length;

/** Runs agent turns on `stream` (a `turn-engine`) until `running()` is false: each `start_turn`, then its rune back to `idle`; a turn not back within {@link ANSWER_MS} is wedged. */
async function agentTurns(user: Client, stream: string, running: () => boolean): Promise<string[]> {
  const outcomes: string[] = [];
  const spawned = await ask(user, { op: 'spawn', id: `${stream}:spawn`, stream, machine: 'turn-engine' });
  if (spawned !== 'ack') return [spawned];
  user.send({ op: 'subscribe', stream });
  for (let t = 1; running() && t < 1_000; t++) {
    const started = await ask(user, { op: 'dispatch', id: `${stream}:turn-${t}`, stream, event: { type: 'start_turn', input: `question ${t}` } });
    if (started !== 'ack') {
      outcomes.push(started);
      break;
    }
    const idle = await user.until(() => turnsEnded(user, stream) >= t, ANSWER_MS);
    outcomes.push(idle ? 'ok' : 'wedged');
    if (!idle) break;
  }
  return outcomes;
}

/** 35 NUL requests in 5 s while 15 users run agent turns and spawn/dispatch turns (spawn, ProcessInteraction, InteractionComplete), and a bystander spawns 300 streams. */
async function nul(): Promise<void> {
  const schema = `rs_attack_${randomBytes(6).toString('hex')}`;
  const store = await postgresStore({ connectionString: POSTGRES_URL, schema });
  const model = scriptedModel([{ text: 'Here is a short answer to that.' }], { whenExhausted: 'cycle' });
  const { engine, server, stop } = await serve({}, createEngine({ store, epics: agentEpics({ model }) }));
  try {
    await engine.spawn('mallory/chat', 'chat-actor');
    const mallory = await Client.open(server.url);
    const bystander = await Client.open(server.url);
    const users = await Promise.all(Array.from({ length: USERS }, () => Client.open(server.url)));
    const started = performance.now();
    const running = () => performance.now() - started < ATTACK_MS;

    const attacking = (async () => {
      for (let i = 0; i < NUL_REQUESTS; i++) {
        mallory.send(nulFrame(i));
        await sleep(ATTACK_MS / NUL_REQUESTS);
      }
    })();
    const spawning = (async () => {
      const answers: Promise<string>[] = [];
      for (let i = 0; i < BYSTANDER_SPAWNS; i++) {
        answers.push(ask(bystander, { op: 'spawn', id: `s-${i}`, stream: `bystander/chat-${i}`, machine: 'chat-actor' }));
        if (i % 6 === 5) await sleep(100); // 300 over 5 s
      }
      return Promise.all(answers);
    })();
    /** Per user, the outcome of each turn: `ok`, or the first answer that was not an ack. */
    const turns = users.map(async (user, u) => {
      const outcomes: string[] = [];
      for (let t = 0; running() && t < 1_000; t++) {
        const stream = `user-${u}/chat-${t}`;
        const steps = [
          { op: 'spawn', id: `${stream}:spawn`, stream, machine: 'chat-actor' },
          { op: 'dispatch', id: `${stream}:start`, stream, event: { type: 'ProcessInteraction', userId } },
          { op: 'dispatch', id: `${stream}:done`, stream, event: { type: 'InteractionComplete', success: true } },
        ];
        let outcome = 'ok';
        for (const step of steps) {
          const answer = await ask(user, step);
          if (answer !== 'ack') {
            outcome = answer;
            break;
          }
        }
        outcomes.push(outcome);
      }
      return outcomes;
    });

    const agentUsers = await Promise.all(Array.from({ length: USERS }, () => Client.open(server.url)));
    const agents = agentUsers.map((user, u) => agentTurns(user, `conv/user-${u}/agent/a/turn`, running));
    await attacking;
    const spawned = await spawning;
    const perUser = await Promise.all(turns);
    const perAgent = await Promise.all(agents);
    const wedgedAgents = perAgent.filter((outcomes) => outcomes.some((o) => o !== 'ok')).length;
    const agentTurnsRun = perAgent.flat();
    await mallory.until(() => mallory.answered >= NUL_REQUESTS, ANSWER_MS);
    const failedUsers = perUser.filter((outcomes) => outcomes.some((o) => o !== 'ok')).length;
    const allTurns = perUser.flat();
    const stored = (await Promise.all(Array.from({ length: BYSTANDER_SPAWNS }, (_, i) => store.head(`bystander/chat-${i}`)))).filter(Boolean).length;
    for (const client of [mallory, bystander, ...users, ...agentUsers]) client.ws.close();
    report(
      `nul. ${NUL_REQUESTS} requests with \\u0000 or a lone surrogate in ${ATTACK_MS / 1000} s against PostgreSQL while ${USERS} other users spawn and dispatch`,
      "a bystander got 3 of 300 spawns acked; 12 of 15 users' turns wedged over 60 s",
      `a bystander got ${spawned.filter((a) => a === 'ack').length} of ${BYSTANDER_SPAWNS} spawns acked (${stored} stored); ${wedgedAgents} of ${USERS} users' agent turns wedged or failed (${agentTurnsRun.filter((o) => o === 'ok').length} of ${agentTurnsRun.length} turns answered within ${ANSWER_MS / 1000} s); ${failedUsers} of ${USERS} users had a spawn/dispatch turn fail (${allTurns.filter((o) => o === 'ok').length} of ${allTurns.length} completed); the attacker's answers: ${tally([...mallory.tallies].flatMap(([code, n]) => Array<string>(n).fill(code)))}`,
      26,
    );
  } finally {
    await stop();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  }
}

export const attacks: Record<string, () => Promise<void>> = { nul };
