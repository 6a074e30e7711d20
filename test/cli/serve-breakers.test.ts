import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { CircuitBreakerState, Rune, TurnEngineState } from '../../src/index.js';
import { createClient } from '../../src/server/client/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

/** Each test starts `runestream serve` twice: on a loaded machine a start takes seconds. */
const TWO_STARTS_MS = 120_000;

/** How long the flaky model's breaker stays OPEN before its timeout would half-open it. */
const OPEN_TIMEOUT_MS = 1000;

/**
 * `flaky` always fails and opens at its second failure; it is a chain of its own (every model is)
 * and the first of the named chain `main`, so two chains share its breaker.
 */
const config = {
  models: {
    flaky: { type: 'scripted', answers: [{ error: 'upstream down' }], breaker: { failureThreshold: 2, openTimeoutMs: OPEN_TIMEOUT_MS } },
    backup: { type: 'scripted', answers: [{ text: 'the backup answers' }] },
  },
  chains: { main: { models: ['flaky', 'backup'] } },
  agents: { assistant: { model: 'main' }, soloist: { model: 'flaky' } },
  defaultRole: 'assistant',
};

/** `runestream serve` on `db` with the configuration file beside it, and a client. */
async function serveOn(db: string) {
  const file = join(dirname(db), 'runestream.json');
  writeFileSync(file, JSON.stringify(config));
  const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
  const [, url, , httpUrl] = await cli.line(LISTENING);
  const client = createClient({ url: url!, WebSocket });
  const stop = async (): Promise<void> => {
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  };
  return { cli, client, httpUrl: httpUrl!, stop };
}

type Client = Awaited<ReturnType<typeof serveOn>>['client'];

/** Waits until provider/flaky's breaker is in `value`. */
const breakerIn = (client: Client, value: CircuitBreakerState['value']): Promise<CircuitBreakerState> =>
  firstValueFrom(client.state$<CircuitBreakerState>('provider/flaky').pipe(filter((state) => state.value === value)));

/**
 * One turn of the default role: its chain calls `flaky` first, which fails once (its breaker made
 * with the configured settings); then an operator's failure opens it and the operator keeps it
 * open, sent together so the open timeout cannot come between them.
 */
async function openAndKeepOpen(client: Client): Promise<void> {
  await client.spawn('conv/c1/agent/a/turn', 'turn-engine');
  await client.dispatch('conv/c1/agent/a/turn', { type: 'start_turn', input: 'hello?' });
  // The backup answered: flaky failed first, its breaker made with the configured settings.
  await firstValueFrom(client.state$<TurnEngineState>('conv/c1/agent/a/turn').pipe(filter((turn) => turn.output === 'the backup answers')));
  expect(await breakerIn(client, 'CLOSED')).toMatchObject({ failureCount: 1, failureThreshold: 2, openTimeoutMs: OPEN_TIMEOUT_MS });
  await Promise.all([client.dispatch('provider/flaky', { type: 'failure', error: 'still down' }), client.dispatch('provider/flaky', { type: 'manual_keep_open' })]);
}

/** The value of `runestream_breaker_state{provider, state}` in a scrape, if it has the series. */
const breakerSeries = (scrape: string, provider: string, state: string): number | undefined => {
  const line = scrape.split('\n').find((each) => each.startsWith(`runestream_breaker_state{provider="${provider}",state="${state}"} `));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
};

describe('runestream serve: provider breakers (issue 28 g)', () => {
  it(
    'manual_keep_open holds an OPEN breaker OPEN past its open timeout and across a restart, until manual_reset (a model in two chains)',
    async () => {
      const db = tempDb();
      const first = await serveOn(db);
      await openAndKeepOpen(first.client);
      const runes: Rune[] = [];
      const watching = first.client.runes$('provider/flaky').subscribe((rune) => runes.push(rune));
      // Many open timeouts pass: none half-opens it.
      await new Promise((resolve) => setTimeout(resolve, OPEN_TIMEOUT_MS * 8));
      watching.unsubscribe();
      expect(runes.filter((rune) => rune.to === 'HALF_OPEN')).toEqual([]);
      expect(await breakerIn(first.client, 'OPEN')).toMatchObject({ keptOpen: true });
      await first.stop();

      // A restart finds it OPEN long past its deadline: still kept open.
      const second = await serveOn(db);
      await new Promise((resolve) => setTimeout(resolve, OPEN_TIMEOUT_MS * 4));
      expect(await breakerIn(second.client, 'OPEN')).toMatchObject({ keptOpen: true });
      await second.client.dispatch('provider/flaky', { type: 'manual_reset' });
      const closed = await breakerIn(second.client, 'CLOSED');
      expect(closed.keptOpen).toBeUndefined();
      await second.stop();
    },
    TWO_STARTS_MS,
  );

  it(
    "runestream_breaker_state shows each stored breaker's state after a restart, before any new breaker rune (SQLite file)",
    async () => {
      const db = tempDb();
      const first = await serveOn(db);
      await openAndKeepOpen(first.client);
      await first.stop();

      const second = await serveOn(db);
      const scrape = await (await fetch(`${second.httpUrl}/metrics`)).text();
      expect(breakerSeries(scrape, 'flaky', 'OPEN')).toBe(1);
      expect(breakerSeries(scrape, 'flaky', 'CLOSED')).toBe(0);
      expect(breakerSeries(scrape, 'backup', 'CLOSED')).toBe(1);
      await second.stop();
    },
    TWO_STARTS_MS,
  );
});
