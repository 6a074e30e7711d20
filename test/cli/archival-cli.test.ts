import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCommand } from '../../src/cli/args.js';
import { serve, type Serving } from '../../src/cli/serve.js';
import { runestream } from '../support/runestream-process.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-archival-cli-'));
const servings: Serving[] = [];
afterAll(async () => {
  for (const serving of servings) await serving.stop();
  rmSync(dir, { recursive: true, force: true });
});
const quiet = { log: () => {}, error: () => {} };
const TOKEN = 'archival-cli-token';

describe('runestream archive and restore, against the running server', () => {
  it('archive moves a closed conversation to the configured folder (relative to the config file), restore brings it back; a refusal exits 1 with its code', async () => {
    const config = join(dir, 'runestream.json');
    writeFileSync(
      config,
      JSON.stringify({ models: { demo: { type: 'demo' } }, agents: { assistant: { model: 'demo' } }, defaultRole: 'assistant', archival: { cold: { folder: 'cold' } } }),
    );
    const command = parseCommand(['serve', '--config', config, '--db', join(dir, 'log.db'), '--port', '0', '--token', TOKEN], {});
    if (command.command !== 'serve') throw new Error('not a serve command');
    const serving = await serve(command, quiet, {});
    servings.push(serving);
    const { engine } = serving;
    const url = serving.server.httpUrl;
    await engine.spawn('conv/c1', 'conversation', { conversationId: 'c1' });
    await engine.dispatch('conv/c1', { type: 'first_message' });

    // Not closed yet: refused, nothing archived.
    const early = runestream(['archive', 'conv/c1', '--url', url, '--token', TOKEN]);
    expect(await early.exited).toBe(1);
    expect(early.stderr).toContain('runestream: archive refused: not_sealed: cannot archive "conv/c1"');
    expect(existsSync(join(dir, 'cold'))).toBe(false);

    await engine.dispatch('conv/c1', { type: 'close_requested', reason: 'done' });
    await engine.dispatch('conv/c1', { type: 'cleanup_complete' });
    const noToken = runestream(['archive', 'conv/c1', '--url', url]);
    expect(await noToken.exited).toBe(1);
    expect(noToken.stderr).toContain('unauthorized');

    const archive = runestream(['archive', 'conv/c1', '--url', url, '--token', TOKEN]);
    expect(await archive.exited).toBe(0);
    expect(JSON.parse(archive.stdout)).toEqual({
      ok: true,
      outcome: 'archived',
      target: 'conv/c1',
      run: 'archive/conv/c1',
      streams: [{ stream: 'conv/c1', fromSeq: 1, seq: 4, segments: 1 }],
    });
    expect(existsSync(join(dir, 'cold', 'streams'))).toBe(true);
    expect((await engine.snapshot<{ value: string }>('conv/c1'))?.state.value).toBe('archived');

    const restore = runestream(['restore', 'conv/c1', '--url', url], { RUNESTREAM_TOKEN: TOKEN });
    expect(await restore.exited).toBe(0);
    expect(JSON.parse(restore.stdout)).toEqual({ ok: true, target: 'conv/c1', streams: [{ stream: 'conv/c1', runes: 4 }] });

    const unknown = runestream(['restore', 'conv/none', '--url', url, '--token', TOKEN]);
    expect(await unknown.exited).toBe(1);
    expect(unknown.stderr).toContain('runestream: restore refused: unknown_stream: unknown stream "conv/none"');
  }, 120_000); // five CLI processes, each starting node with tsx

  it('checks its command line', () => {
    expect(() => parseCommand(['archive'], {})).toThrow('archive needs the stream to archive, e.g. runestream archive conv/c1');
    expect(() => parseCommand(['archive', 'conv/c1', '--db', 'x.db'], {})).toThrow('--db is for serve; archive takes --url and the token');
    expect(() => parseCommand(['restore', 'conv/c1', '--url', 'ftp://x'], {})).toThrow('--url must be the server');
    expect(parseCommand(['restore', 'conv/c1'], { RUNESTREAM_TOKEN: 't' })).toEqual({ command: 'restore', target: 'conv/c1', url: 'http://127.0.0.1:7070', token: 't' });
  });
});
