import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { Rune, ToolCallState, TurnEngineState } from '../../src/index.js';
import { createClient } from '../../src/server/client/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

describe('runestream serve: the demo agent, offline', () => {
  it('saves a note only after a person approves it, and the approval carries the turn to its answer', async () => {
    const cli = runestream(['serve', '--port', '0', '--db', tempDb()]);
    const [, url] = await cli.line(LISTENING);
    await cli.line(/^runestream: demo agent on the offline scripted demo model: spawn "conv\/<c>\/agent\/<a>\/turn" as "turn-engine", then dispatch start_turn$/m);
    const client = createClient({ url: url!, WebSocket });

    await client.spawn('conv/me/agent/me/turn', 'turn-engine');
    const asked = firstValueFrom(client.runes$('conv/me/agent/me/turn').pipe(filter((rune: Rune) => rune.kind === 'turn.tool_calls_received')));
    await client.dispatch('conv/me/agent/me/turn', { type: 'start_turn', input: 'note: buy milk' });
    const callId = ((await asked).event as { callIds?: string[] }).callIds![0]!;

    const call = `conv/me/agent/me/call/${callId}`;
    await firstValueFrom(client.state$<ToolCallState>(call).pipe(filter((s) => s.value === 'awaiting_approval')));
    const answered = firstValueFrom(client.state$<TurnEngineState>('conv/me/agent/me/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await client.dispatch(call, { type: 'approved', approver: 'me' });
    const turn = await answered;
    expect(turn.output).toBe('I will save that note once you approve it.Done: {"saved":"buy milk","notes":1}');
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('refuses half an OpenAI-compatible configuration, naming what is missing', async () => {
    const cli = runestream(['serve', '--port', '0', '--db', tempDb()], { RUNESTREAM_MODEL: 'llama3.2' });
    expect(await cli.exited).toBe(2);
    expect(cli.stderr).toContain('RUNESTREAM_MODEL is set but OPENAI_BASE_URL is not');
  });

  it('uses the OpenAI-compatible model that OPENAI_BASE_URL and RUNESTREAM_MODEL name', async () => {
    // A chat-completions server on 127.0.0.1 that streams one answer, as Ollama or vLLM would.
    const requests: { model: string; auth: string | undefined }[] = [];
    const fake = createHttpServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        requests.push({ model: (JSON.parse(body) as { model: string }).model, auth: req.headers.authorization });
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const content of ['Hello from ', 'the model.']) res.write(`data: ${JSON.stringify({ choices: [{ delta: { content } }] })}\n\n`);
        res.end(`data: ${JSON.stringify({ choices: [{ delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`);
      });
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    const baseURL = `http://127.0.0.1:${(fake.address() as AddressInfo).port}/v1`;
    try {
      const cli = runestream(['serve', '--port', '0', '--db', tempDb()], { OPENAI_BASE_URL: baseURL, RUNESTREAM_MODEL: 'tiny', OPENAI_API_KEY: 'k1' });
      const [, url] = await cli.line(LISTENING);
      await cli.line(new RegExp(`^runestream: demo agent on tiny at ${baseURL.replace(/[.]/g, '\\.')}:`, 'm'));
      const client = createClient({ url: url!, WebSocket });
      await client.spawn('conv/me/agent/me/turn', 'turn-engine');
      const answered = firstValueFrom(client.state$<TurnEngineState>('conv/me/agent/me/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
      await client.dispatch('conv/me/agent/me/turn', { type: 'start_turn', input: 'hi' });
      expect((await answered).output).toBe('Hello from the model.');
      expect(requests).toEqual([{ model: 'tiny', auth: 'Bearer k1' }]);
      await client.close();
    } finally {
      fake.close();
    }
  });
});
