import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { Rune, ToolCallState, TurnEngineState } from '../../src/index.js';
import { createClient } from '../../src/server/client/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

const tokens = {
  'watcher-token-0123456789': { id: 'wendy', may: ['see'] },
  'driver-token-0123456789': { id: 'dave', may: ['see', 'drive'] },
  'approver-token-0123456789': { id: 'carol', may: ['see', 'approve'] },
  'bob-token-0123456789abc': { id: 'bob', may: ['see', 'drive', 'approve'], streams: ['user/bob/*'] },
};
const as = (url: string, token: keyof typeof tokens) => createClient({ url, WebSocket, token });

describe('runestream serve --tokens-file: several identities, who may watch, drive and approve (issue 26, item 6)', () => {
  it('a watcher cannot approve nor drive, a driver cannot approve; an approver approves, recorded with its id whatever approver the client sends; streams confine a holder', async () => {
    const db = tempDb();
    const file = join(dirname(db), 'tokens.json');
    writeFileSync(file, JSON.stringify(tokens));
    const cli = runestream(['serve', '--port', '0', '--db', db, '--tokens-file', file]);
    const [, url] = await cli.line(LISTENING);
    await cli.line(/^runestream: 4 tokens from --tokens-file, each holder limited to what it may$/m);
    const [wendy, dave, carol, bob] = [
      as(url!, 'watcher-token-0123456789'),
      as(url!, 'driver-token-0123456789'),
      as(url!, 'approver-token-0123456789'),
      as(url!, 'bob-token-0123456789abc'),
    ];

    await expect(wendy.spawn('conv/w/agent/a/turn', 'turn-engine')).rejects.toMatchObject({ code: 'forbidden' });
    // The demo agent asks to save a note: a call waiting for a person.
    await dave.spawn('conv/me/agent/me/turn', 'turn-engine');
    const asked = firstValueFrom(wendy.runes$('conv/me/agent/me/turn').pipe(filter((rune: Rune) => rune.kind === 'turn.tool_calls_received')));
    await dave.dispatch('conv/me/agent/me/turn', { type: 'start_turn', input: 'note: buy milk' });
    const call = `conv/me/agent/me/call/${((await asked).event as { callIds?: string[] }).callIds![0]!}`;
    await firstValueFrom(wendy.state$<ToolCallState>(call).pipe(filter((s) => s.value === 'awaiting_approval')));

    for (const client of [wendy, dave]) {
      await expect(client.dispatch(call, { type: 'approved', approver: 'carol' })).rejects.toMatchObject({
        code: 'forbidden',
        message: `not allowed to approve stream "${call}"`,
      });
      await expect(client.dispatch(call, { type: 'denied' })).rejects.toMatchObject({ code: 'forbidden' });
    }
    await expect(carol.dispatch('conv/me/agent/me/turn', { type: 'interrupt' })).rejects.toMatchObject({ code: 'forbidden' }); // approves, does not drive
    const answered = firstValueFrom(wendy.state$<TurnEngineState>('conv/me/agent/me/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await carol.dispatch(call, { type: 'approved', approver: 'someone-else' });
    expect((await answered).output).toContain('Done:');
    expect((await firstValueFrom(wendy.state$<ToolCallState>(call))).approver).toBe('carol');

    // bob may only touch user/bob/*.
    await bob.spawn('user/bob/chat', 'chat-actor');
    await expect(bob.spawn('user/alice/chat', 'chat-actor')).rejects.toMatchObject({ code: 'forbidden' });
    for (const client of [wendy, dave, carol, bob]) await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('refuses a tokens file that cannot be used, naming the holder and field but never the token; and --tokens-file with --token', async () => {
    const db = tempDb();
    const file = join(dirname(db), 'tokens.json');
    writeFileSync(file, JSON.stringify({ 'a-token-0123456789abcdef': { id: 'ann', may: ['watch'] } }));
    const bad = runestream(['serve', '--port', '0', '--db', db, '--tokens-file', file]);
    expect(await bad.exited).toBe(2);
    expect(bad.stderr).toContain(`--tokens-file "${file}": the 1. token's may.0: `);
    expect(bad.stderr).not.toContain('a-token-0123456789abcdef');
    const both = runestream(['serve', '--port', '0', '--db', db, '--tokens-file', file, '--token', 'x']);
    expect(await both.exited).toBe(2);
    expect(both.stderr).toContain('--tokens-file and --token are both set: use one');
  });
});
