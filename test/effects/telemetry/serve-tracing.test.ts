import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { TurnEngineState } from '../../../src/index.js';
import { createClient } from '../../../src/server/client/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../../support/runestream-process.js';

const SDK = fileURLToPath(new URL('../../fixtures/otel-jsonl-sdk.mjs', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  cleanUpProcesses();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface ExportedSpan {
  readonly name: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly attributes: Record<string, unknown>;
}

describe('runestream serve: tracing through the global tracer provider', () => {
  it('sends a turn, its model calls and its tool call to the SDK the application registers with --import', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runestream-spans-'));
    dirs.push(dir);
    const file = join(dir, 'spans.jsonl');
    const cli = runestream(['serve', '--port', '0', '--db', tempDb()], { NODE_OPTIONS: `--import ${SDK}`, RUNESTREAM_TEST_SPANS: file });
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    const turn = 'conv/me/agent/me/turn';
    await client.spawn(turn, 'turn-engine');
    const answered = firstValueFrom(client.state$<TurnEngineState>(turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await client.dispatch(turn, { type: 'start_turn', input: 'what is 3 + 4' });
    expect((await answered).output).toBe('Let me add those.Done: 7');
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);

    expect(existsSync(file)).toBe(true);
    const spans = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as ExportedSpan);
    const root = spans.find((span) => span.name === 'invoke_agent me')!;
    expect(spans.map((span) => [span.name, span.parentSpanId === root.spanId])).toEqual([
      ['chat demo-scripted', true],
      ['execute_tool add', true],
      ['chat demo-scripted', true],
      ['invoke_agent me', false],
    ]);
    expect(spans[0]!.attributes).toMatchObject({ 'gen_ai.provider.name': 'scripted', 'gen_ai.request.model': 'demo-scripted' });
    // serve's default: no content on the spans.
    expect(spans.flatMap((span) => Object.keys(span.attributes)).filter((key) => key.includes('messages') || key.includes('arguments'))).toEqual([]);
  });
});
