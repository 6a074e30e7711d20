import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, firstValueFrom, take, toArray } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentDefinitionStream, createEngine, type AgentDefinition, type AgentRegistrationState, type Engine } from '../../../src/index.js';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { agentRegistry, providerBreakers, scriptedModel, type ProviderChain } from '../../../src/agents.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ScriptedReply } from '../../support/chat-completions-server.js';
import { ManualClock, runChain, settle } from '../llm/support.js';
import { sqliteStore } from '../../../src/streams/sqlite-store.js';

const START = Date.parse('2026-11-24T10:00:00Z');
/** A chain whose model answers every call. */
const answering: ProviderChain = { providers: [{ name: 'offline', model: scriptedModel([{ text: 'OK' }], { whenExhausted: 'cycle' }) }] };
/** An MCP server that is a real child process which exits at once. */
const deadServer = { command: process.execPath, args: ['-e', 'process.exit(3)'], env: {} };

/** The servers a configuration declares, by name: a definition names them in its `tools`. */
const declared = { shared: { files: deadServer } };

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

/** A chain of one provider, `local`, at a scripted OpenAI-compatible server on 127.0.0.1. */
const localChain = (server: ChatCompletionsServer): ProviderChain => ({
  providers: [{ name: 'local', model: createOpenAICompatible({ name: 'local', baseURL: server.baseURL })('m'), breaker: { openTimeoutMs: 60_000 } }],
});

let engine: Engine | undefined;
let server: ChatCompletionsServer | undefined;
afterEach(async () => {
  await engine?.close();
  await server?.close();
  engine = undefined;
  server = undefined;
});

/** The scripted server answering request n with `replies[n]` (the last one after that). */
const serve = async (...replies: ScriptedReply[]): Promise<ChatCompletionsServer> =>
  (server = await startChatCompletionsServer((_, n) => replies[Math.min(n, replies.length - 1)]!));

describe('agentRegistry', () => {
  it('an agent whose MCP server cannot start goes ERROR -> RETRYING -> ... -> DECOMMISSIONED, each retry after its backoff (virtual time)', async () => {
    const clock = new ManualClock(START);
    engine = createEngine({ scheduler: clock, epics: [agentRegistry({ chains: { offline: answering }, maxAttempts: 2, retryBaseMs: 10_000, mcpServers: declared })] });
    const stream = agentDefinitionStream('broken');
    await engine.spawn(stream, 'agent-registration', definition('broken', { tools: ['files'] }));
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

  it('an agent whose model answers (a real HTTP server in the OpenAI wire format) goes ACTIVE; an operator pauses and resumes it', async () => {
    const local = await serve({ text: 'OK' });
    const clock = new ManualClock(START);
    engine = createEngine({ scheduler: clock, epics: [agentRegistry({ chains: { main: localChain(local) } })] });
    const stream = agentDefinitionStream('writer');
    await engine.spawn(stream, 'agent-registration', definition('writer', { model: 'main', tools: ['clock'], system: 'You write.' }));
    expect(await reached(engine, stream, 'ACTIVE')).toMatchObject({ value: 'ACTIVE' });
    expect(local.requests).toHaveLength(1);
    expect(local.requests[0]?.messages).toEqual([
      { role: 'system', content: 'You write.' },
      { role: 'user', content: 'Reply with the word OK.' },
    ]);
    expect((await engine.snapshot(`provider/local`))?.state).toMatchObject({ value: 'CLOSED' });

    expect(await engine.dispatch(stream, { type: 'pause', reason: 'maintenance' })).toMatchObject({ accepted: true });
    expect(await reached(engine, stream, 'PAUSED')).toMatchObject({ reason: 'maintenance' });
    expect(await engine.dispatch(stream, { type: 'resume' })).toMatchObject({ accepted: true });
    expect(await reached(engine, stream, 'ACTIVE')).toEqual(expect.not.objectContaining({ reason: expect.anything() }));
    expect(await engine.dispatch(stream, { type: 'remove' })).toMatchObject({ accepted: true });
    expect(await engine.dispatch(stream, { type: 'resume' })).toMatchObject({ accepted: false, reason: expect.stringContaining('terminal state') });
  });

  it('pauses an ACTIVE agent while every provider of its chain is OPEN (a 429 with Retry-After), and resumes it when one half-opens', async () => {
    const local = await serve({ text: 'OK' }, { status: 429, headers: { 'retry-after': '7' } });
    const clock = new ManualClock(START);
    const chain = localChain(local);
    engine = createEngine({ scheduler: clock, epics: [agentRegistry({ chains: { main: chain } }), providerBreakers(chain)] });
    const stream = agentDefinitionStream('writer');
    await engine.spawn(stream, 'agent-registration', definition('writer', { model: 'main' }));
    await reached(engine, stream, 'ACTIVE');

    const run = await runChain(engine, chain, clock); // a conversation's call: rate limited
    expect(run.error).toBeDefined();
    expect((await engine.snapshot('provider/local'))?.state).toMatchObject({ value: 'OPEN', openForMs: 7000 });
    expect(await reached(engine, stream, 'PAUSED')).toMatchObject({ reason: 'rate_limited' });
    // It does not resume on its own before the breaker lets a call through.
    clock.advanceTo(START + 6999);
    await settle();
    expect((await engine.snapshot<AgentRegistrationState>(stream))?.state.value).toBe('PAUSED');
    clock.advanceTo(START + 7000); // the Retry-After: the breaker half-opens, the agent resumes
    expect(await reached(engine, stream, 'ACTIVE')).toMatchObject({ value: 'ACTIVE' });
    expect((await engine.snapshot('provider/local'))?.state).toMatchObject({ value: 'HALF_OPEN' });
  });

  it('a retry pending when the process stops is re-armed from the log after a restart, and fires at once if it is due', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runestream-registry-'));
    const file = join(dir, 'log.db');
    const options = { chains: { offline: answering }, maxAttempts: 1, retryBaseMs: 60_000, mcpServers: declared };
    const broken = definition('broken', { tools: ['files'] });
    const stream = agentDefinitionStream('broken');
    try {
      const clock = new ManualClock(START);
      engine = createEngine({ store: sqliteStore(file), scheduler: clock, epics: [agentRegistry(options)] });
      await engine.spawn(stream, 'agent-registration', broken);
      await reached(engine, stream, 'ERROR');
      await engine.close();

      // Restarted 30 s later: the retry is still 30 s away.
      const later = new ManualClock(START + 30_000);
      engine = createEngine({ store: sqliteStore(file), scheduler: later, epics: [agentRegistry(options)] });
      await settle();
      later.advanceTo(START + 59_999);
      await settle();
      expect((await engine.snapshot<AgentRegistrationState>(stream))?.state.value).toBe('ERROR');
      later.advanceTo(START + 60_000);
      expect(await reached(engine, stream, 'DECOMMISSIONED')).toMatchObject({ attempts: 1 });
      await engine.close();

      // Restarted long after a retry was due: it fires at once.
      const again = definition('again', { tools: ['files'] });
      engine = createEngine({ store: sqliteStore(file), scheduler: new ManualClock(START), epics: [agentRegistry(options)] });
      await engine.spawn(agentDefinitionStream('again'), 'agent-registration', again);
      await reached(engine, agentDefinitionStream('again'), 'ERROR');
      await engine.close();
      const muchLater = new ManualClock(START + 3_600_000);
      engine = createEngine({ store: sqliteStore(file), scheduler: muchLater, epics: [agentRegistry(options)] });
      await settle();
      muchLater.advanceTo(START + 3_600_000);
      expect(await reached(engine, agentDefinitionStream('again'), 'DECOMMISSIONED')).toMatchObject({ attempts: 1 });
    } finally {
      await engine?.close();
      engine = undefined;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('agent registration: bad input', () => {
  it('a name that is taken is refused with stream_exists, saying the name is taken; nothing is written', async () => {
    engine = createEngine();
    const stream = agentDefinitionStream('writer');
    expect(await engine.spawn(stream, 'agent-registration', definition('writer'))).toMatchObject({ accepted: true });
    const again = await engine.spawn(stream, 'agent-registration', definition('writer', { system: 'Another.' }));
    expect(again).toEqual({
      accepted: false,
      code: 'stream_exists',
      reason: 'agent name "writer" is taken: "agent-def/writer" is registered already (names are not reused, even once removed)',
    });
    expect((await engine.snapshot(stream))?.seq).toBe(1);
  });

  it('a definition that breaks its limits is refused with invalid_input naming the field', async () => {
    engine = createEngine();
    const tooLong = await engine.spawn(agentDefinitionStream('writer'), 'agent-registration', definition('writer', { system: 'x'.repeat(100_001) }));
    expect(tooLong).toMatchObject({ accepted: false, code: 'invalid_input', reason: expect.stringContaining('system') });
    const badName = await engine.spawn(agentDefinitionStream('bad'), 'agent-registration', definition('bad name!'));
    expect(badName).toMatchObject({ accepted: false, code: 'invalid_input', reason: expect.stringContaining('name') });
    const tooMany = definition('many', { mcpServers: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`s${i}`, deadServer])) });
    expect(await engine.spawn(agentDefinitionStream('many'), 'agent-registration', tooMany)).toMatchObject({
      accepted: false,
      code: 'invalid_input',
      reason: expect.stringContaining('at most 16 MCP servers'),
    });
  });

  it('a client tool whose input schema does not compile is refused with the reason, before anything is written', async () => {
    engine = createEngine();
    const stream = agentDefinitionStream('coder');
    const lookup = { name: 'lookup', description: 'Looks up a word.', inputSchema: { type: 'object', properties: { word: { type: 'nope' } } } };
    const refused = await engine.spawn(stream, 'agent-registration', definition('coder', { clientTools: [lookup] }));
    expect(refused).toEqual({
      accepted: false,
      code: 'invalid_input',
      reason: 'invalid input for "agent-registration": clientTools.0.inputSchema: does not compile: Unsupported type: nope',
    });
    expect(await engine.snapshot(stream)).toBeUndefined();
    const notAnObject = await engine.spawn(stream, 'agent-registration', definition('coder', { clientTools: [{ ...lookup, inputSchema: { type: 'string' } }] }));
    expect(notAnObject).toMatchObject({ accepted: false, code: 'invalid_input', reason: expect.stringContaining('must be an object schema') });
    const twice = { ...lookup, inputSchema: { type: 'object' } };
    expect(await engine.spawn(stream, 'agent-registration', definition('coder', { clientTools: [twice, twice] }))).toMatchObject({
      accepted: false,
      code: 'invalid_input',
      reason: expect.stringContaining('two client tools share a name'),
    });
  });
});
