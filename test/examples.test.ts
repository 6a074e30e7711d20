import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanUpProcesses, LISTENING, runestream, tempDb } from './support/runestream-process.js';
import { buildExamples, describeExamples, examplesDir, programExamples, root, typecheckExamples } from './support/examples.js';

// Every program of examples/ runs here as a user would run it (bundled against the source, as the
// README's examples are). Those that talk to a server get a real `runestream serve`.
const withServer = new Set(['demo-client.ts']);
const programs = programExamples();
describeExamples(
  'examples/',
  programs.filter((example) => !withServer.has(example.title)),
);

const run = promisify(execFile);

describe('examples/demo-client.ts against runestream serve', () => {
  const dir = examplesDir('demo-client-');
  const example = programs.find((p) => p.title === 'demo-client.ts')!;
  let path = '';
  let url = '';
  beforeAll(async () => {
    const [built] = await buildExamples([example], dir);
    if (!built!.ok) throw new Error(`examples/demo-client.ts does not build: ${built!.error}`);
    const [typeErrors] = typecheckExamples([example], dir);
    if (typeErrors!.length > 0) throw new Error(`examples/demo-client.ts does not type-check:\n${typeErrors!.join('\n')}`);
    path = built!.path;
    const serve = runestream(['serve', '--port', '0', '--db', tempDb()]);
    url = (await serve.line(LISTENING))[1]!;
  }, 240_000);
  afterAll(() => {
    cleanUpProcesses();
    rmSync(dir, { recursive: true, force: true });
  });

  const demoClient = (...args: string[]) => run(process.execPath, [path, ...args], { cwd: root, env: { ...process.env, RUNESTREAM_URL: url }, timeout: 30_000 });

  it('asks the time: the clock needs no approval, nothing is answered, and the program exits 0 with the answer', async () => {
    const { stdout, stderr } = await demoClient('what time is it');
    expect(stderr).toBe('');
    expect(stdout).not.toMatch(/approved|denied/);
    // Each model call's text apart: the preamble before the clock, then the answer.
    expect(stdout).toMatch(/^assistant: Let me look at the clock\.\nassistant: .*\d{2}:\d{2}.*\nturn\.completed$/m);
  });

  it('saves a note: save_note is approved, runs, and the answer says so', async () => {
    const { stdout, stderr } = await demoClient('note: buy milk');
    expect(stderr).toBe('');
    expect(stdout).toMatch(/^approved save_note$/m);
    expect(stdout).toMatch(/^assistant: .*buy milk/m);
    expect(stdout).toMatch(/^turn\.completed$/m);
  });

  it('cannot reach a server: says so and exits 1 instead of hanging', async () => {
    const failed = await run(process.execPath, [path, 'hi'], { cwd: root, env: { ...process.env, RUNESTREAM_URL: 'ws://127.0.0.1:9' }, timeout: 30_000 }).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect('code' in failed && failed.code).toBe(1);
    expect('stderr' in failed && failed.stderr).toMatch(/^demo-client: .*no server at ws:\/\/127\.0\.0\.1:9/m);
  });
});
