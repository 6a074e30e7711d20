import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { filter, firstValueFrom, startWith } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  agentDefinitionStream,
  agentStreams,
  createEngine,
  type AgentDefinition,
  type AgentLifecycleState,
  type AgentRegistrationState,
  type AgentState,
  type Engine,
  type ToolCallState,
  type TurnEngineState,
} from '../../../src/index.js';
import {
  agentEpics,
  agentProfiles,
  agentRegistry,
  buildAgentProfile,
  profileToolkit,
  reactAgentEpics,
  registeredAgentAdmission,
  scriptedModel,
  type AgentProfiles,
  type ProviderChain,
  type ScriptStep,
} from '../../../src/agents.js';
import { sqliteStore } from '../../../src/streams/sqlite-store.js';
import type { RuneStore } from '../../../src/streams/store.js';
import type { McpServerConfig } from '../../../src/server/index.js';

/** The fixture MCP server, writing its pid to `pids` when it starts. */
const mcpServer = (pids: string) => ({
  command: process.execPath,
  args: ['--import', 'tsx', 'test/fixtures/mcp/pid-server.ts'],
  env: { MCP_PID_FILE: pids },
});

/** A model for every role: "OK" to the registry's check; asks for the tools a user message names; then says what they gave. */
function model() {
  return scriptedModel(
    [
      (call): ScriptStep => {
        const prompt = JSON.stringify(call.prompt);
        if (prompt.includes('Reply with the word OK.')) return { text: 'OK' };
        if (prompt.includes('tool-result')) return { text: 'Done.' };
        if (prompt.includes('sum and more')) {
          return {
            toolCalls: [
              { toolName: 'add', input: { a: 2, b: 3 }, toolCallId: 'add1' },
              { toolName: 'math__echo', input: { text: 'hi' }, toolCallId: 'echo1' },
              { toolName: 'clock', input: {}, toolCallId: 'clock1' },
            ],
          };
        }
        if (prompt.includes('sum')) return { toolCalls: [{ toolName: 'add', input: { a: 2, b: 3 }, toolCallId: 'add1' }] };
        return { text: 'Hello.' };
      },
    ],
    { whenExhausted: 'cycle' },
  );
}

const assistant = { model: 'offline', tools: ['clock'], mcpServers: {}, clientTools: [{ name: 'lookup', description: 'Looks up.', inputSchema: { type: 'object' } }] };

interface Running {
  readonly engine: Engine;
  readonly profiles: AgentProfiles;
  readonly offline: ReturnType<typeof model>;
  close(): Promise<void>;
}

/** An engine as `runestream serve` makes one: a configured role `assistant` (fixed), the registry making definitions live, admission (turn-based and ReAct). */
async function start(store?: RuneStore, mcpServers: Record<string, McpServerConfig> = {}): Promise<Running> {
  const offline = model();
  const chains: Record<string, ProviderChain> = { offline: { providers: [{ name: 'offline', model: offline }] } };
  // The configuration's MCP servers, which a definition names in its tools.
  const toolkit = profileToolkit(chains, { mcpStderr: 'ignore', mcpServers });
  const fixed = await buildAgentProfile(assistant, toolkit);
  // One configured role: no delegation, as `runestream serve` has it.
  const profiles = agentProfiles({ fixed: { assistant: fixed.profile }, toolkit, delegation: false });
  const admission = registeredAgentAdmission({ defaultRole: 'assistant', profiles });
  const engine = createEngine({
    ...(store === undefined ? {} : { store }),
    epics: [
      agentRegistry({ chains, profiles, retryBaseMs: 600_000, mcpStderr: 'ignore' }),
      ...agentEpics({ model: chains.offline!, tools: fixed.profile.tools!, agents: profiles, admission }),
      ...reactAgentEpics({ model: chains.offline!, tools: fixed.profile.tools!, breakers: false, admission }),
    ],
  });
  return {
    engine,
    profiles,
    offline,
    close: async () => {
      await engine.close();
      await profiles.idle();
      await fixed.close();
    },
  };
}

const running: Running[] = [];
const folders: string[] = [];
afterEach(async () => {
  for (const each of running.splice(0)) await each.close();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});
const tempFolder = (): string => {
  const folder = mkdtempSync(join(tmpdir(), 'rs-registered-'));
  folders.push(folder);
  return folder;
};
const started = async (store?: RuneStore, mcpServers?: Record<string, McpServerConfig>): Promise<Running> => {
  const one = await start(store, mcpServers);
  running.push(one);
  return one;
};

const until = <S extends { value: string }>(engine: Engine, stream: string, value: string): Promise<S> =>
  firstValueFrom(engine.state$<S>(stream).pipe(filter((s) => s.value === value)));
/** The state of `stream` once a live rune takes it to `value` (subscribed before the stream exists). */
const whenReaches = <S>(engine: Engine, stream: string, value: string): Promise<S> =>
  firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === stream && rune.to === value))).then(async () => (await engine.snapshot<S>(stream))!.state);

/** Registers a definition as a client does (a spawn of `agent-def/<name>`) and waits for its verdict. */
async function register(engine: Engine, definition: AgentDefinition, verdict: 'ACTIVE' | 'ERROR'): Promise<AgentRegistrationState> {
  const stream = agentDefinitionStream(definition.name);
  const reached = whenReaches<AgentRegistrationState>(engine, stream, verdict);
  await engine.spawn(stream, 'agent-registration', definition);
  return reached;
}

/** Starts an agent of `role` in conversation `c` and runs one turn on `input`: its turn state once idle again. */
async function turnOf(engine: Engine, c: string, role: string, input: string): Promise<TurnEngineState> {
  const agent = agentStreams(`conv/${c}`, 'a1');
  await engine.spawn(agent.lifecycle, 'agent-lifecycle', { agentId: 'a1', role });
  const ready = whenReaches<AgentLifecycleState>(engine, agent.lifecycle, 'idle');
  await engine.spawn(agent.turn, 'turn-engine');
  await ready;
  const answered = firstValueFrom(engine.state$<TurnEngineState>(agent.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
  await engine.dispatch(agent.turn, { type: 'start_turn', input });
  return answered;
}

/** Whether the process `pid` is gone. */
const gone = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return false;
  } catch {
    return true;
  }
};

describe('agent definitions registered at runtime run like configured roles', () => {
  it("an ACTIVE definition (built-in, MCP and client tools) runs its agents: model, own tools, not another role's; retired, no new agent starts and its MCP server is stopped", async () => {
    const pids = join(tempFolder(), 'pids');
    const { engine, profiles, offline } = await started(undefined, { math: mcpServer(pids) });
    const calc: AgentDefinition = {
      name: 'calc',
      model: 'offline',
      tools: ['add', 'math'],
      mcpServers: {},
      clientTools: [{ name: 'ask_user', description: 'Asks the user.', inputSchema: { type: 'object', properties: { q: { type: 'string' } } } }],
      system: 'You add.',
    };
    await register(engine, calc, 'ACTIVE');

    const turn = await turnOf(engine, 'c1', 'calc', 'the sum and more');
    expect(turn.output).toBe('Done.');
    const root = agentStreams('conv/c1', 'a1');
    expect((await engine.snapshot<ToolCallState>(root.call('add1')))?.state).toMatchObject({ value: 'completed_result', output: 5 });
    expect((await engine.snapshot<ToolCallState>(root.call('echo1')))?.state).toMatchObject({ value: 'completed_result' });
    expect((await engine.snapshot<ToolCallState>(root.call('clock1')))?.state).toMatchObject({
      value: 'error_result',
      error: expect.stringContaining('tool "clock" is not a tool of role "calc"'),
    });
    // The model saw the definition's system prompt and exactly its tools.
    const call = offline.doStreamCalls.find((each) => JSON.stringify(each.prompt).includes('the sum and more'))!;
    expect(call.prompt[0]).toEqual({ role: 'system', content: 'You add.' });
    expect(call.tools?.map((tool) => tool.name).sort()).toEqual(['add', 'ask_user', 'math__add', 'math__big', 'math__crash', 'math__echo', 'math__fail', 'math__slow'].sort());
    const [checked, live] = readFileSync(pids, 'utf8').trim().split('\n').map(Number);
    expect(gone(checked!)).toBe(true); // the activation check's server, stopped after the check
    expect(gone(live!)).toBe(false); // the live profile's

    // Retired: its profile goes, its MCP server is stopped, and a new agent of its role does not start.
    await engine.dispatch(agentDefinitionStream('calc'), { type: 'remove' });
    await firstValueFrom(
      profiles.changes$.pipe(
        startWith('calc'),
        filter(() => profiles.get('calc') === undefined),
      ),
    );
    for (let waited = 0; !gone(live!) && waited < 10_000; waited += 50) await sleep(50);
    expect(gone(live!)).toBe(true);
    const agent = agentStreams('conv/c2', 'a1');
    await engine.spawn(agent.lifecycle, 'agent-lifecycle', { agentId: 'a1', role: 'calc' });
    const failed = whenReaches<AgentLifecycleState>(engine, agent.lifecycle, 'failed');
    await engine.spawn(agent.turn, 'turn-engine');
    expect((await failed).error).toBe('agent "calc" is DECOMMISSIONED: new conversations start only on ACTIVE agents');
  });

  it('is held to its budget', async () => {
    const { engine } = await started();
    await register(engine, { name: 'frugal', model: 'offline', tools: [], mcpServers: {}, budget: { modelCalls: 1 } }, 'ACTIVE');
    const lifecycle = agentStreams('conv/c1', 'a1').lifecycle;
    const terminated = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === lifecycle && rune.kind === 'agent.terminated')));
    expect((await turnOf(engine, 'c1', 'frugal', 'hello')).output).toBe('Hello.');
    expect((await terminated).event).toEqual({ type: 'budget_exhausted', reason: 'agent budget exhausted: modelCalls 1 of 1' });
  });

  it('after a restart on the same SQLite file, an agent of an ACTIVE registration started at once runs: its profile is rebuilt from the log', async () => {
    const db = join(tempFolder(), 'log.db');
    const first = await started(sqliteStore(db));
    await register(first.engine, { name: 'calc', model: 'offline', tools: ['add'], mcpServers: {} }, 'ACTIVE');
    await first.close();
    running.splice(running.indexOf(first), 1);

    const { engine, offline } = await started(sqliteStore(db));
    const turn = await turnOf(engine, 'c1', 'calc', 'the sum');
    expect(turn.output).toBe('Done.');
    expect((await engine.snapshot<ToolCallState>(agentStreams('conv/c1', 'a1').call('add1')))?.state).toMatchObject({ value: 'completed_result', output: 5 });
    // Rebuilt, not checked again: the model heard only the conversation.
    expect(offline.doStreamCalls.some((each) => JSON.stringify(each.prompt).includes('Reply with the word OK.'))).toBe(false);
  });

  it('refuses a definition whose client tool has the name of a different tool of another role: activation fails (ERROR) naming the clash; one declared alike is shared', async () => {
    const { engine } = await started();
    const clashing = await register(
      engine,
      { name: 'other', model: 'offline', tools: [], mcpServers: {}, clientTools: [{ name: 'lookup', description: 'Looks elsewhere.', inputSchema: { type: 'object' } }] },
      'ERROR',
    );
    expect(clashing.error).toBe('tool name clash: agent "other": a different tool is already named "lookup"; tool names must be unique');
    await register(engine, { name: 'alike', model: 'offline', tools: ['clock'], mcpServers: {}, clientTools: assistant.clientTools }, 'ACTIVE');
    expect((await turnOf(engine, 'c1', 'alike', 'hello')).output).toBe('Hello.');
  });
});

describe('ReAct agents are gated by the registry', () => {
  it('an agent of a role whose registration is PAUSED does not start (init error naming why), and never calls the model; after resume a new one does', async () => {
    const { engine, offline } = await started();
    const registration = agentDefinitionStream('assistant');
    await register(engine, { name: 'assistant', ...assistant }, 'ACTIVE');
    await engine.dispatch(registration, { type: 'pause', reason: 'maintenance' });
    await until(engine, registration, 'PAUSED');
    const calls = offline.doStreamCalls.length;

    const paused = agentStreams('conv/c1', 'a1');
    const failed = whenReaches<AgentLifecycleState>(engine, paused.lifecycle, 'failed');
    await engine.spawn(paused.react, 'react-agent');
    expect((await failed).error).toBe('agent "assistant" is PAUSED (maintenance): new conversations start only on ACTIVE agents');
    await engine.dispatch(paused.react, { type: 'user-message-received', messageId: 'm1', content: 'Hi', timestamp: Date.now() });

    await engine.dispatch(registration, { type: 'resume' });
    await until(engine, registration, 'ACTIVE');
    const resumed = agentStreams('conv/c2', 'a1');
    await engine.spawn(resumed.react, 'react-agent');
    const answered = firstValueFrom(engine.state$<AgentState>(resumed.react).pipe(filter((s) => s.reActContext === null && s.messages.length === 2)));
    await engine.dispatch(resumed.react, { type: 'user-message-received', messageId: 'm1', content: 'Hi', timestamp: Date.now() });
    expect((await answered).messages[1]?.content).toBe('Hello.');
    // Only the resumed agent's call: the refused one never called the model.
    expect(offline.doStreamCalls.length).toBe(calls + 1);
  });
});
