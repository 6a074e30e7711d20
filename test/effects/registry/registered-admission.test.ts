import { filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentDefinitionStream, createEngine, type AgentLifecycleState, type AgentRegistrationState, type Engine, type TurnEngineState } from '../../../src/index.js';
import { agentEpics, agentRegistry, registeredAgentAdmission, scriptedModel, type ProviderChain } from '../../../src/agents.js';
import { ManualClock, settle } from '../llm/support.js';

const START = Date.parse('2026-11-24T10:00:00Z');
const chain: ProviderChain = { providers: [{ name: 'offline', model: scriptedModel([{ text: 'OK' }], { whenExhausted: 'cycle' }) }] };
const deadServer = { command: process.execPath, args: ['-e', 'process.exit(3)'], env: {} };

let engine: Engine | undefined;
afterEach(async () => {
  await engine?.close();
  engine = undefined;
});

const until = <S extends { value: string }>(engine: Engine, stream: string, value: string): Promise<S> =>
  firstValueFrom(engine.state$<S>(stream).pipe(filter((s) => s.value === value)));
/** The state of `stream` once a live rune takes it to `value` (subscribed before the stream exists). */
const whenReaches = <S>(engine: Engine, stream: string, value: string): Promise<S> =>
  firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === stream && rune.to === value))).then(async () => (await engine.snapshot<S>(stream))!.state);

function start(): Engine {
  return createEngine({
    scheduler: new ManualClock(START),
    epics: [
      agentRegistry({ chains: { offline: chain }, retryBaseMs: 60_000, mcpServers: { shared: { files: deadServer } } }),
      ...agentEpics({ model: chain, admission: registeredAgentAdmission({ defaultRole: 'assistant' }) }),
    ],
  });
}

describe('registeredAgentAdmission: new conversations start only on ACTIVE agents', () => {
  it('an agent of a role whose registration is in ERROR fails init naming why, and its turn is interrupted', async () => {
    engine = start();
    const registration = agentDefinitionStream('assistant');
    await engine.spawn(registration, 'agent-registration', { name: 'assistant', model: 'offline', tools: ['files'], mcpServers: {} });
    await until<AgentRegistrationState>(engine, registration, 'ERROR');

    const failing = whenReaches<AgentLifecycleState>(engine, 'conv/c1/agent/a1', 'failed');
    await engine.spawn('conv/c1/agent/a1/turn', 'turn-engine');
    const failed = await failing;
    expect(failed.error).toMatch(/^agent "assistant" is ERROR \(MCP server "files" did not start: .*\): new conversations start only on ACTIVE agents$/);
    await engine.dispatch('conv/c1/agent/a1/turn', { type: 'start_turn', input: 'Hi' });
    // Interrupted, and idle again with that rune.
    const interrupted = await firstValueFrom(engine.state$<TurnEngineState>('conv/c1/agent/a1/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    expect(interrupted.reason).toBe(`the agent is failed: ${failed.error}`);
  });

  it('an agent of a role whose registration is ACTIVE starts and answers; paused by an operator, the next conversation is refused', async () => {
    engine = start();
    const registration = agentDefinitionStream('assistant');
    await engine.spawn(registration, 'agent-registration', { name: 'assistant', model: 'offline', tools: [], mcpServers: {} });
    await until<AgentRegistrationState>(engine, registration, 'ACTIVE');

    const ready = whenReaches<AgentLifecycleState>(engine, 'conv/c1/agent/a1', 'idle');
    await engine.spawn('conv/c1/agent/a1/turn', 'turn-engine');
    await ready;
    await engine.dispatch('conv/c1/agent/a1/turn', { type: 'start_turn', input: 'Hi' });
    expect((await firstValueFrom(engine.state$<TurnEngineState>('conv/c1/agent/a1/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)))).output).toBe('OK');

    await engine.dispatch(registration, { type: 'pause', reason: 'maintenance' });
    await settle();
    const refused = whenReaches<AgentLifecycleState>(engine, 'conv/c2/agent/a1', 'failed');
    await engine.spawn('conv/c2/agent/a1/turn', 'turn-engine');
    expect((await refused).error).toBe('agent "assistant" is PAUSED (maintenance): new conversations start only on ACTIVE agents');
  });
});
