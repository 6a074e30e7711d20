import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { examplesDir, root, typecheckExamples } from '../support/examples.js';
import { hasChromium, launchChromium } from '../support/chromium.js';

// examples/browser as a user runs it: `npx tsx serve.ts` in its folder, then the page it prints
// opened in a real browser.
const folder = `${root}examples/browser`;

/** Starts examples/browser/serve.ts on a free port: the process and the URL it prints. */
async function serveExample() {
  const child = spawn(process.execPath, ['--import', 'tsx', 'serve.ts'], { cwd: folder, env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const printed = /^open (http:\/\/127\.0\.0\.1:\d+\/)$/m.exec(out);
      if (printed !== null) resolve(printed[1]!);
    });
    child.on('exit', (code) => reject(new Error(`serve.ts exited (${code}) before printing its URL: ${out}`)));
  });
  return { child, url };
}

describe('examples/browser', () => {
  it('type-checks (the page against the DOM, the server against Node)', () => {
    const files = ['page.ts', 'serve.ts'].map((name) => ({ file: `examples/browser/${name}`, line: 1, title: name, code: readFileSync(`${folder}/${name}`, 'utf8') }));
    const dir = examplesDir('browser-example-');
    try {
      expect(typecheckExamples(files, dir)).toEqual([[], []]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!hasChromium('test/browser/example-page'))('examples/browser in chromium', () => {
  let browser: Browser;
  let served: Awaited<ReturnType<typeof serveExample>>;

  beforeAll(async () => {
    [browser, served] = await Promise.all([launchChromium(), serveExample()]);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (served?.child.exitCode === null) served.child.kill('SIGKILL');
  });

  it('loads with no console error, sends a message and shows the streamed answer; serve.ts ends on SIGTERM', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(served.url);
    await page.locator('#turn', { hasText: /^idle$/ }).waitFor();
    await page.fill('#input', 'hello from chromium');
    await page.keyboard.press('Enter');
    await page.locator('#answer', { hasText: /^You said: hello from chromium$/ }).waitFor();
    expect(await page.textContent('#connection')).toBe('SUBSCRIBED');
    expect(await page.textContent('#error')).toBe('');
    expect(problems).toEqual([]);
    await page.close();

    served.child.kill('SIGTERM');
    const [code] = (await once(served.child, 'exit')) as [number | null];
    expect(code).toBe(0);
  });
});
