import { filter, firstValueFrom, take, toArray } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentDefinitionStream, createEngine, type AgentDefinition, type AgentRegistrationState, type Engine } from '../../../src/index.js';
import { agentRegistry, scriptedModel, type ProviderChain } from '../../../src/agents.js';
import { ManualClock, settle } from '../llm/support.js';

const START = Date.parse('2026-11-24T10:00:00Z');
/** A chain whose model answers every call. */
const answering: ProviderChain = { providers: [{ name: 'offline', model: scriptedModel([{ text: 'OK' }], { whenExhausted: 'cycle' }) }] };
/** An MCP server that is a real child process which exits at once. */
const deadServer = { command: process.execPath, args: ['-e', 'process.exit(3)'], env: {} };

const definition = (name: string, extra: Partial<AgentDefinition> = {}): AgentDefinition => ({ name, model: 'offline', tools: [], mcpServers: {}, ...extra });

/** Resolves once the registration's state is `value` (and the effects of that state had a turn to start). */
async function reached(engine: Engine, stream: string, value: AgentRegistrationState['value']): Promise<AgentRegistrationState> {
  const state = await firstValueFrom(engine.state$<AgentRegistrationState>(stream).pipe(filter((s) => s.value === value)));
  await settle();
  return state;
}

/** Every state a stream went through, from its stored runes. */
async function path(engine: Engine, stream: string): Promise<string[]> {
  const seq = (await engine.snapshot(stream))!.seq;
  const runes = await firstValueFrom(engine.runes$(stream).pipe(take(seq), toArray()));
  return runes.map((rune) => `${rune.kind}->${rune.to}`);
}

let engine: Engine | undefined;
afterEach(async () => {
  await engine?.close();
  engine = undefined;
});

describe('agentRegistry', () => {
  it('an agent whose MCP server cannot start goes ERROR -> RETRYING -> ... -> DECOMMISSIONED, each retry after its backoff (virtual time)', async () => {
    const clock = new ManualClock(START);
    engine = createEngine({ scheduler: clock, epics: [agentRegistry({ chains: { offline: answering }, maxAttempts: 2, retryBaseMs: 10_000 })] });
    const stream = agentDefinitionStream('broken');
    await engine.spawn(stream, 'agent-registration', definition('broken', { tools: ['files'], mcpServers: { files: deadServer } }));
    expect(await reached(engine, stream, 'ERROR')).toMatchObject({ error: expect.stringContaining('MCP server "files" did not start') });

    clock.advanceTo(START + 9_999); // the first retry is due 10 s after the failure
    await settle();
    expect((await engine.snapshot<AgentRegistrationState>(stream))?.state.value).toBe('ERROR');
    clock.advanceTo(START + 10_000);
    // The retry fails with an attempt left: back to ERROR, the next backoff twice as long.
    expect(await reached(engine, stream, 'ERROR')).toMatchObject({ attempts: 1 });
    clock.advanceTo(START + 10_000 + 19_999);
    await settle();
    expect((await engine.snapshot<AgentRegistrationState>(stream))?.state.value).toBe('ERROR');
    clock.advanceTo(START + 30_000);
    expect(await reached(engine, stream, 'DECOMMISSIONED')).toMatchObject({ attempts: 2, error: expect.stringContaining('MCP server "files" did not start') });
    expect(await path(engine, stream)).toEqual([
      'spawned->REGISTERED',
      'register->ACTIVATING',
      'init_failed->ERROR',
      'retry_init->RETRYING',
      'init_failed->ERROR',
      'retry_init->RETRYING',
      'retry_failed->DECOMMISSIONED',
    ]);
  });
});
