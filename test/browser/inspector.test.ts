import { mkdirSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chatActor, createEngine, foldEvents, type Rune } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { createServer } from '../../src/server/index.js';
import { hasChromium, launchChromium } from '../support/chromium.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

/** Screenshots of each test, kept as artefacts (never committed). */
const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/inspector/', import.meta.url));
const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

describe.skipIf(!hasChromium('test/browser/inspector'))('the inspector in a real browser, on `runestream serve`', { timeout: 60_000 }, () => {
  let browser: Browser;
  const pages: Page[] = [];
  const clients: RunestreamClient[] = [];

  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    await Promise.all(pages.splice(0).map((page) => page.close()));
    await Promise.all(clients.splice(0).map((client) => client.close()));
    cleanUpProcesses();
  });

  /** `runestream serve` on a fresh SQLite file, a client of it, and the inspector open in a page that records console errors. */
  async function inspector(args: string[] = [], db = tempDb()) {
    const cli = runestream(['serve', '--port', '0', '--db', db, ...args]);
    const [, url, , httpUrl] = await cli.line(LISTENING);
    const token = args.includes('--token') ? args[args.indexOf('--token') + 1] : undefined;
    const client = createClient({ url: url!, WebSocket, ...(token === undefined ? {} : { token }) });
    clients.push(client);
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    pages.push(page);
    const errors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(`${httpUrl!}/`);
    return { client, page, errors, httpUrl: httpUrl! };
  }

  const row = (page: Page, stream: string) => page.locator(`#stream-rows .row[data-stream="${stream}"]`);
  const shot = (page: Page, name: string) => page.screenshot({ path: `${ARTIFACTS}${name}.png`, fullPage: true });

  it('lists a stream another client spawns, live, with its last activity; its diagram highlights the state after a dispatch; no console errors', async () => {
    const { client, page, errors, httpUrl } = await inspector();
    await page.locator('#stream-count').filter({ hasText: 'streams' }).waitFor();
    await client.spawn('chat/live', 'chat-actor');
    await row(page, 'chat/live').click();
    await page.locator('#diagram .node.current[data-state="idle"]').waitFor();
    await client.dispatch('chat/live', { type: 'ProcessInteraction', userId });
    await page.locator('#diagram .node.current[data-state="running"]').waitFor();
    expect(await page.locator('#diagram .node.current').count()).toBe(1);
    await expect.poll(() => row(page, 'chat/live').locator('.value').textContent()).toBe('running');
    // Its last activity: the time of its last rune.
    const { runes } = (await (await fetch(`${httpUrl}/inspector/api/streams/chat%2Flive/runes`)).json()) as { runes: Rune[] };
    await expect.poll(() => row(page, 'chat/live').locator('time').getAttribute('datetime')).toBe(new Date(runes.at(-1)!.at).toISOString());
    await page.locator('#timeline li[data-seq="2"]').waitFor();
    await shot(page, 'stream');
    expect(errors).toEqual([]);
  });

  it("time travel: the state shown at seq k is the engine's fold of runes 1..k, and the diff between two seqs", async () => {
    const { client, page, httpUrl } = await inspector();
    const stream = 'chat/travel';
    await client.spawn(stream, 'chat-actor');
    for (const event of [
      { type: 'ProcessInteraction', userId },
      { type: 'InteractionComplete', success: true },
      { type: 'Pause', reason: 'lunch' },
    ])
      await client.dispatch(stream, event);
    const { runes } = (await (await fetch(`${httpUrl}/inspector/api/streams/${encodeURIComponent(stream)}/runes`)).json()) as { runes: Rune[] };
    await row(page, stream).click();
    await page.locator('#timeline li[data-seq="4"]').waitFor();
    for (const k of [1, 2, 3, 4]) {
      await page.locator('#travel-seq').fill(String(k));
      await page.locator('#travel-compare').fill(k > 1 ? String(k - 1) : '');
      await page.locator('#travel-go').click();
      const expected = foldEvents(
        chatActor,
        undefined,
        0,
        runes.slice(0, k).map((rune) => rune.event),
      );
      await expect.poll(async () => JSON.parse((await page.locator('#travel-state').textContent()) || 'null')).toEqual(expected);
    }
    await expect.poll(() => page.locator('#travel-diff').textContent()).toContain('/value: "idle" → "paused"');
    await shot(page, 'time-travel');
  });

  it('a pending approval is approved with the keyboard alone, and the tool runs; a message typed into the agent box streams an answer', async () => {
    const { client, page } = await inspector();
    const turn = 'conv/kb/agent/kb/turn';
    await client.spawn(turn, 'turn-engine');
    await client.dispatch(turn, { type: 'start_turn', input: 'note: buy milk' });
    const approve = page.locator('#approval-list button', { hasText: 'Approve' });
    await approve.waitFor({ timeout: 10_000 }).catch(async (error: unknown) => {
      await shot(page, 'approval-failed');
      throw error;
    });
    const call = (await page.locator('#approval-list .id').first().textContent())!;
    // Tab from the top of the page until the Approve button has the focus, then Enter.
    await page.locator('body').focus();
    for (let tabs = 0; tabs < 20 && !(await approve.evaluate((element) => element.matches(':focus'))); tabs++) await page.keyboard.press('Tab');
    expect(await approve.evaluate((element) => element.matches(':focus'))).toBe(true);
    await page.keyboard.press('Enter');
    await firstValueFrom(client.state$<{ value: string }>(call).pipe(filter((state) => state.value === 'completed_result')));
    await expect.poll(() => page.locator('#approval-list li').count()).toBe(0);

    // Talk: open the turn stream from the keyboard (search, then Enter in the list), type, send.
    // The turn answers, idle again with its last rune: ready for the next message.
    await firstValueFrom(client.state$<{ value: string }>(turn).pipe(filter((state) => state.value === 'idle')));
    await page.locator('#search').fill('conv/kb/agent/kb/turn');
    await page.locator('#stream-list').focus();
    await page.keyboard.press('Enter');
    await page.locator('#talk-input').fill('what time is it');
    await page.keyboard.press('Enter');
    // The demo model looks at the clock (a tool), then answers with the ISO 8601 time it read.
    // Each model call's text apart: the preamble before the tool, then the answer.
    await expect
      .poll(() => page.locator('#talk-answer .talk-message').allTextContents(), { timeout: 15_000 })
      .toEqual(['Let me look at the clock.', expect.stringMatching(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/)]);
    await shot(page, 'agent');
  });

  it('with 10,000 streams the list stays usable with a bounded number of rows, and search narrows it', async () => {
    // Written before the server starts (a client may spawn at most 1000 a second): the list comes from the stored heads.
    const db = tempDb();
    const engine = createEngine({ store: sqliteStore(db) });
    for (let batch = 0; batch < 100; batch++) await Promise.all(Array.from({ length: 100 }, (_, i) => engine.spawn(`chat/many-${batch * 100 + i}`, 'chat-actor')));
    await engine.close();
    const { page } = await inspector([], db);
    // Besides the 10,000: the serve process's own streams (its metrics collector, its model's breaker).
    await expect.poll(async () => Number((await page.locator('#stream-count').textContent())?.split(' ')[0]), { timeout: 20_000 }).toBeGreaterThanOrEqual(10_000);
    expect(await page.locator('#stream-rows .row').count()).toBeLessThan(100);
    await page.locator('#stream-list').evaluate((element) => (element.scrollTop = element.scrollHeight / 2));
    await expect.poll(() => page.locator('#stream-rows .row').count()).toBeGreaterThan(0);
    expect(await page.locator('#stream-rows .row').count()).toBeLessThan(100);
    await page.locator('#search').fill('many-4242');
    await expect.poll(() => page.locator('#stream-count').textContent()).toMatch(/^1 of 100\d\d streams$/);
    await row(page, 'chat/many-4242').click();
    await page.locator('#diagram .node.current[data-state="idle"]').waitFor();
    await shot(page, 'many');
  });

  it('an Approve on a call the connection may not drive is refused, and the page shows why; the call stays waiting', async () => {
    const store = sqliteStore(tempDb());
    const engine = createEngine({ store });
    // Everyone may see every stream; nobody may drive the locked conversation's streams.
    const server = await createServer({
      engine,
      port: 0,
      inspector: { store },
      authorize: (_request, stream, action) => action === 'see' || !stream.startsWith('conv/locked/'),
    });
    try {
      const call = 'conv/locked/agent/a/call/c1';
      await engine.spawn(call, 'tool-call', { callId: 'c1', toolName: 'save_note', arguments: { text: 'x' } });
      await engine.dispatch(call, { type: 'requires_approval' });
      const page = await browser.newPage();
      pages.push(page);
      await page.goto(`${server.httpUrl}/`);
      const approve = page.locator('#approval-list button', { hasText: 'Approve' });
      await approve.click();
      await expect.poll(() => page.locator('#approval-error').textContent()).toMatch(/conv\/locked\/agent\/a\/call\/c1: forbidden/);
      expect((await engine.snapshot<{ value: string }>(call))?.state.value).toBe('awaiting_approval');
      await shot(page, 'refused');
    } finally {
      await server.close();
      await engine.close();
    }
  });

  it('a pending approval shows its tool and arguments, as text, before it can be approved', async () => {
    const store = sqliteStore(tempDb());
    const engine = createEngine({ store });
    const server = await createServer({ engine, port: 0, inspector: { store } });
    try {
      const call = 'conv/c/agent/a/call/c2';
      const markup = '<img src=x onerror="document.title=\'pwned\'">';
      await engine.spawn(call, 'tool-call', { callId: 'c2', toolName: 'delete_files', arguments: { path: '/home', note: markup } });
      await engine.dispatch(call, { type: 'requires_approval', policyReason: 'writes to disk' });
      const page = await browser.newPage();
      pages.push(page);
      await page.goto(`${server.httpUrl}/`);
      const item = page.locator('#approval-list li', { hasText: call });
      await item.locator('.tool').waitFor();
      expect(await item.locator('.tool').textContent()).toBe('delete_files');
      expect(await item.locator('.reason').textContent()).toBe('writes to disk');
      expect(JSON.parse((await item.locator('.arguments').textContent())!)).toEqual({ path: '/home', note: markup });
      expect(await page.locator('#approval-list img').count()).toBe(0);
      expect(await page.title()).not.toBe('pwned');
      await shot(page, 'approval-arguments');
      await item.locator('button', { hasText: 'Approve' }).click();
      await expect.poll(async () => (await engine.snapshot<{ value: string }>(call))?.state.value).toBe('executing');
    } finally {
      await server.close();
      await engine.close();
    }
  });

  it('a page on another origin cannot frame the inspector: the frame stays empty', async () => {
    const { httpUrl } = await inspector();
    const framing = createHttpServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><iframe id="victim" src="${httpUrl}/"></iframe>`));
    await new Promise<void>((resolve) => framing.listen(0, '127.0.0.1', resolve));
    try {
      const page = await browser.newPage();
      pages.push(page);
      await page.goto(`http://127.0.0.1:${(framing.address() as AddressInfo).port}/`, { waitUntil: 'load' });
      const frame = page.frames().find((candidate) => candidate !== page.mainFrame())!;
      expect(frame).toBeDefined();
      expect(await frame.locator('#approval-list').count()).toBe(0);
      expect(frame.url()).not.toBe(`${httpUrl}/`);
    } finally {
      await new Promise((resolve) => framing.close(resolve));
    }
  });

  it('asks for the token when the server has one, and works once it is given', async () => {
    const { client, page } = await inspector(['--token', 'sesame']);
    await page.locator('#token-form').waitFor();
    await page.locator('#token').fill('wrong');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#token-error').textContent()).toMatch(/refused/);
    await page.locator('#token').fill('sesame');
    await page.keyboard.press('Enter');
    await client.spawn('chat/with-token', 'chat-actor');
    await row(page, 'chat/with-token').waitFor();
    await shot(page, 'token');
  });
});
