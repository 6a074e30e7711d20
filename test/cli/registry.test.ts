import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentLifecycleState, AgentRegistrationState, TurnEngineState } from '../../src/index.js';
import { createClient } from '../../src/server/client/index.js';
import { ServerConfigError, parseServerConfig } from '../../src/server/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

/** A stdio MCP server command that is a real process exiting at once. */
const deadServer = { command: process.execPath, args: ['-e', 'process.exit(3)'] };

const config = (assistantSystem: string) => ({
  models: { offline: { type: 'scripted', answers: [{ text: 'OK' }] } },
  agents: {
    assistant: { model: 'offline', system: assistantSystem },
    broken: { model: 'offline', tools: ['files'], mcpServers: { files: deadServer } },
  },
  defaultRole: 'assistant',
  registry: { maxAttempts: 1, retryBaseMs: 600_000, clientRegistration: true },
});

describe('runestream serve with the agent registry (a real process)', () => {
  it('registers the roles at start (idempotently across restarts, a changed one redefined), logs their states, and registers over the protocol', async () => {
    const db = tempDb();
    const file = join(dirname(db), 'runestream.json');
    writeFileSync(file, JSON.stringify(config('You help.')));
    let cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    await cli.line(/^runestream: agent registry: "assistant" registered \(REGISTERED\)$/m);
    await cli.line(/^runestream: agent registry: agent-def\/assistant ACTIVATING -> ACTIVE$/m);
    await cli.line(/^runestream: agent registry: agent-def\/broken ACTIVATING -> ERROR \(MCP server "files" did not start: .*\)$/m);

    const client = createClient({ url: url!, WebSocket });
    // A conversation on the default role, which is ACTIVE.
    await client.spawn('conv/c/agent/a/turn', 'turn-engine');
    const answered = firstValueFrom(client.state$<TurnEngineState>('conv/c/agent/a/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await client.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'Hi' });
    expect((await answered).output).toBe('OK');

    // Registered over the protocol: a spawn of agent-def/<name> with the definition as input.
    await client.spawn('agent-def/writer', 'agent-registration', { name: 'writer', model: 'offline' });
    await firstValueFrom(client.state$<AgentRegistrationState>('agent-def/writer').pipe(filter((s) => s.value === 'ACTIVE')));
    await expect(client.spawn('agent-def/writer', 'agent-registration', { name: 'writer', model: 'offline', system: 'Other.' })).rejects.toMatchObject({
      code: 'stream_exists',
      message: expect.stringContaining('agent name "writer" is taken'),
    });
    await expect(client.spawn('agent-def/bad', 'agent-registration', { name: 'bad', model: 'offline', tools: 'clock' })).rejects.toMatchObject({ code: 'invalid_input' });
    // An operator pauses and resumes it.
    await client.dispatch('agent-def/writer', { type: 'pause', reason: 'maintenance' });
    await cli.line(/^runestream: agent registry: agent-def\/writer ACTIVE -> PAUSED \(maintenance\)$/m);
    await client.dispatch('agent-def/writer', { type: 'resume' });
    await cli.line(/^runestream: agent registry: agent-def\/writer PAUSED -> ACTIVE$/m);
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);

    // Restarted with the same file: nothing registered again.
    cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    await cli.line(LISTENING);
    await cli.line(/^runestream: agent registry: "broken" unchanged \(ERROR\)$/m);
    await cli.line(/^runestream: agent registry: "assistant" unchanged \(ACTIVE\)$/m);
    // Its last line at start: the signal handlers are installed right after it.
    await cli.line(/^runestream: assistant agent on /m);
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);

    // Restarted with the assistant's role changed: it is checked again.
    writeFileSync(file, JSON.stringify(config('You help, briefly.')));
    cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    await cli.line(/^runestream: agent registry: "assistant" redefined \(ACTIVATING\)$/m);
    await cli.line(/^runestream: agent registry: agent-def\/assistant ACTIVATING -> ACTIVE$/m);
    await cli.line(/^runestream: assistant agent on /m);
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('runs the agents of a definition registered over the protocol (its model, its built-in tool) while ACTIVE; retired, a new one is refused', async () => {
    const db = tempDb();
    const file = join(dirname(db), 'runestream.json');
    writeFileSync(
      file,
      JSON.stringify({
        models: {
          offline: { type: 'scripted', answers: [{ text: 'OK' }] },
          // The registry's check, then a turn: a call of `add`, then the answer.
          counting: { type: 'scripted', answers: [{ text: 'OK' }, { toolCalls: [{ toolName: 'add', input: { a: 2, b: 3 } }] }, { text: 'It is 5.' }] },
        },
        agents: { assistant: { model: 'offline' } },
        defaultRole: 'assistant',
        registry: { clientRegistration: true },
      }),
    );
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('agent-def/calc', 'agent-registration', { name: 'calc', model: 'counting', tools: ['add'] });
    await firstValueFrom(client.state$<AgentRegistrationState>('agent-def/calc').pipe(filter((s) => s.value === 'ACTIVE')));

    await client.spawn('conv/c/agent/a', 'agent-lifecycle', { agentId: 'a', role: 'calc' });
    await client.spawn('conv/c/agent/a/turn', 'turn-engine');
    await firstValueFrom(client.state$<AgentLifecycleState>('conv/c/agent/a').pipe(filter((s) => s.value === 'idle')));
    const answered = firstValueFrom(client.state$<TurnEngineState>('conv/c/agent/a/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await client.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'What is 2 + 3?' });
    expect((await answered).output).toBe('It is 5.');

    await client.dispatch('agent-def/calc', { type: 'remove' });
    await cli.line(/^runestream: agent registry: agent-def\/calc ACTIVE -> DECOMMISSIONED$/m);
    await client.spawn('conv/d/agent/a', 'agent-lifecycle', { agentId: 'a', role: 'calc' });
    await client.spawn('conv/d/agent/a/turn', 'turn-engine');
    const refused = await firstValueFrom(client.state$<AgentLifecycleState>('conv/d/agent/a').pipe(filter((s) => s.value === 'failed')));
    expect(refused.error).toBe('agent "calc" is DECOMMISSIONED: new conversations start only on ACTIVE agents');
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('refuses a registry whose longest retry delay is shorter than its first, and client tools that clash, naming the field', () => {
    const tool = { name: 'lookup', description: 'Looks up.', inputSchema: { type: 'object' } };
    const text = JSON.stringify({
      ...config('You help.'),
      agents: {
        assistant: { model: 'offline', clientTools: [tool] },
        other: {
          model: 'offline',
          clientTools: [
            { ...tool, description: 'Looks elsewhere.' },
            { ...tool, name: 'clock' },
          ],
        },
      },
      registry: { retryBaseMs: 10_000, retryMaxMs: 1000 },
    });
    let error: unknown;
    try {
      parseServerConfig(text, 'runestream.json');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ServerConfigError);
    expect((error as ServerConfigError).issues).toEqual([
      { path: 'agents.other.clientTools[0]', message: 'client tool "lookup" is declared differently by another role' },
      { path: 'agents.other.clientTools[1].name', message: '"clock" is a built-in tool\'s name' },
      { path: 'registry.retryMaxMs', message: 'must be at least retryBaseMs (10000)' },
    ]);
  });
});
