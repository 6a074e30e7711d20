import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { EMPTY, asyncScheduler, lastValueFrom, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { MAX_CONFIG_BYTES, ServerConfigError, configuredAgents, configuredClis, parseServerConfig } from '../../src/server/index.js';
import type { AgentCliAdapter } from '../../src/effects/cli/cli-adapter.js';
import { createEngine } from '../../src/index.js';
import { chainCall$, type ModelPart, type ScriptedModel } from '../../src/agents.js';

const mcpServer = fileURLToPath(new URL('../fixtures/mcp/server.ts', import.meta.url));

/** A configuration using every section. */
const good = {
  models: {
    local: {
      type: 'openai-compatible',
      baseURL: 'http://127.0.0.1:11434/v1',
      model: 'llama3.2',
      apiKeyEnv: 'LOCAL_KEY',
      breaker: { failureThreshold: 2, openTimeoutMs: 10_000, halfOpenMaxCalls: 2 },
    },
    offline: { type: 'demo' },
    canned: { type: 'scripted', answers: [{ text: 'Canned answer.' }] },
  },
  chains: { main: { models: ['local', 'offline'], callTimeoutMs: 30_000 } },
  agents: {
    assistant: { description: 'Answers questions.', model: 'main', tools: ['clock', 'add'], system: 'Be brief.', budget: { outputTokens: 10_000, modelCalls: 20 } },
    researcher: {
      model: 'canned',
      tools: ['files'],
      mcpServers: { files: { command: process.execPath, args: ['--import', 'tsx', mcpServer], env: { MCP_FIXTURE_LOG: '' } } },
    },
  },
  defaultRole: 'assistant',
  prices: { local: { inputPerMillion: 0, outputPerMillion: 0 } },
  conversationBudget: { cost: 5, wallClockMs: 600_000 },
  delegation: { maxDepth: 2, maxAgents: 8 },
};

/** The issues of a configuration that fails, as `path: message` lines without the source. */
function issuesOf(config: unknown): string[] {
  try {
    parseServerConfig(typeof config === 'string' ? config : JSON.stringify(config), 'runestream.json');
  } catch (error) {
    expect(error).toBeInstanceOf(ServerConfigError);
    expect((error as ServerConfigError).code).toBe('config_invalid');
    return (error as ServerConfigError).issues.map((issue) => `${issue.path}: ${issue.message}`);
  }
  throw new Error('the configuration was accepted');
}

const withAgent = (agent: Record<string, unknown>) => ({ ...good, agents: { ...good.agents, assistant: { ...good.agents.assistant, ...agent } } });

describe('parseServerConfig', () => {
  it('accepts a file using every section, with its defaults', () => {
    const config = parseServerConfig(JSON.stringify(good), 'runestream.json');
    expect(config.chains.main).toEqual(good.chains.main);
    expect(config.agents.researcher).toMatchObject({ tools: ['files'], mcpServers: { files: { command: process.execPath } } });
    expect(config.agents.assistant?.mcpServers).toEqual({});
    expect(parseServerConfig(JSON.stringify({ models: { m: { type: 'demo' } }, agents: { a: { model: 'm' } }, defaultRole: 'a' }), 'x')).toEqual({
      models: { m: { type: 'demo' } },
      chains: {},
      agents: { a: { model: 'm', tools: [], mcpServers: {} } },
      defaultRole: 'a',
      prices: {},
    });
  });

  it('names the file and the field path of every issue, with code config_invalid', () => {
    const error = (() => {
      try {
        return parseServerConfig(JSON.stringify({ ...good, defaultRole: 'boss' }), '/etc/runestream.json');
      } catch (caught) {
        return caught as ServerConfigError;
      }
    })() as ServerConfigError;
    expect(error).toMatchObject({ name: 'ServerConfigError', code: 'config_invalid', source: '/etc/runestream.json' });
    expect(error.message).toBe('/etc/runestream.json: defaultRole: unknown role "boss"; the roles are "assistant", "researcher"');
  });

  it('refuses broken cross-references: a chain naming an unknown model, an agent an unknown chain or tool, prices of an unknown model', () => {
    expect(issuesOf({ ...good, chains: { main: { models: ['local', 'gpt5'] } } })).toEqual([
      'chains.main.models[1]: unknown model "gpt5"; the models are "local", "offline", "canned"',
    ]);
    expect(issuesOf(withAgent({ model: 'fast' }))).toEqual([
      'agents.assistant.model: unknown chain or model "fast"; the chains are "main", the models "local", "offline", "canned"',
    ]);
    expect(issuesOf(withAgent({ tools: ['clock', 'shell'] }))).toEqual([
      'agents.assistant.tools[1]: unknown tool "shell": not a built-in tool ("clock", "add", "save_note"), one of this agent\'s mcpServers ((none)) nor of the configuration\'s ((none))',
    ]);
    expect(issuesOf({ ...good, prices: { gpt5: { inputPerMillion: 1, outputPerMillion: 2 } } })).toEqual([
      'prices.gpt5: unknown model "gpt5"; the models are "local", "offline", "canned"',
    ]);
    expect(issuesOf({ ...good, chains: { ...good.chains, offline: { models: ['local'] } } })).toEqual([
      'chains.offline: "offline" names a model too: a chain\'s name must differ from every model\'s',
    ]);
    expect(issuesOf({ ...good, chains: { main: { models: ['local', 'local'] } } })).toEqual(['chains.main.models[1]: model "local" appears twice in the chain']);
  });

  it('refuses bad shapes: a misspelt key, a bad URL, a bad breaker, a bad budget, a name that cannot be a stream id, missing sections', () => {
    expect(issuesOf({ ...good, agent: {} })).toEqual([': Unrecognized key: "agent"']);
    expect(issuesOf({ ...good, models: { ...good.models, local: { ...good.models.local, baseURL: 'localhost:11434' } } })).toEqual([
      'models.local.baseURL: must be an http(s) URL such as http://localhost:11434/v1',
    ]);
    expect(issuesOf({ ...good, models: { ...good.models, local: { ...good.models.local, apiKey: 'sk-secret' } } })).toEqual(['models.local: Unrecognized key: "apiKey"']);
    expect(issuesOf({ ...good, models: { ...good.models, offline: { type: 'demo', breaker: { halfOpenMaxCalls: 0 } } } })).toEqual([
      'models.offline.breaker.halfOpenMaxCalls: Too small: expected number to be >0',
    ]);
    // One breaker per model, with one setting: a chain's breaker would be a second (issue 28 g).
    expect(issuesOf({ ...good, chains: { main: { models: ['local', 'offline'], breaker: { failureThreshold: 2 } } } })).toEqual([
      'chains.main.breaker: a chain has no breaker: each model has its own, whatever chains it is in; set models.local.breaker, models.offline.breaker',
    ]);
    expect(issuesOf(withAgent({ budget: { tokens: 5 } }))).toEqual(['agents.assistant.budget: Unrecognized key: "tokens"']);
    expect(issuesOf({ ...good, models: { 'my/model': { type: 'demo' } } })[0]).toBe(
      'models.my/model: must be 1 to 64 letters, digits, "_", "-" or "." (starting with a letter or digit)',
    );
    expect(issuesOf({ ...good, models: { ...good.models, odd: { type: 'anthropic' } } })).toEqual([
      "models.odd.type: Invalid discriminator value. Expected 'openai-compatible' | 'demo' | 'scripted'",
    ]);
    expect(issuesOf({ models: {}, agents: {}, defaultRole: 'a' })).toEqual([
      'models: needs at least one model',
      'agents: needs at least one agent',
      'defaultRole: unknown role "a"; the roles are (none)',
    ]);
  });

  it('reads the metrics key with its defaults, and refuses a misspelt or out-of-range one naming the field', () => {
    const base = { models: { offline: { type: 'demo' } }, agents: { a: { model: 'offline' } }, defaultRole: 'a' };
    expect(parseServerConfig(JSON.stringify({ ...base, metrics: {} }), 'runestream.json').metrics).toEqual({ enabled: true });
    expect(parseServerConfig(JSON.stringify({ ...base, metrics: { flushEveryMs: 5000, file: 'm.json' } }), 'runestream.json').metrics).toEqual({
      enabled: true,
      flushEveryMs: 5000,
      file: 'm.json',
    });
    expect(() => parseServerConfig(JSON.stringify({ ...base, metrics: { flushEvery: 5000 } }), 'runestream.json')).toThrow(
      /^runestream\.json: metrics: Unrecognized key: "flushEvery"/,
    );
    expect(() => parseServerConfig(JSON.stringify({ ...base, metrics: { flushEveryMs: 0 } }), 'runestream.json')).toThrow(/^runestream\.json: metrics\.flushEveryMs: /);
  });

  it('reads the telemetry key with its defaults (traced, no content), and refuses a misspelt or mistyped one naming the field', () => {
    const base = { models: { offline: { type: 'demo' } }, agents: { a: { model: 'offline' } }, defaultRole: 'a' };
    expect(parseServerConfig(JSON.stringify(base), 'runestream.json').telemetry).toBeUndefined();
    expect(parseServerConfig(JSON.stringify({ ...base, telemetry: {} }), 'runestream.json').telemetry).toEqual({ enabled: true, captureContent: false });
    expect(parseServerConfig(JSON.stringify({ ...base, telemetry: { captureContent: true } }), 'runestream.json').telemetry).toEqual({ enabled: true, captureContent: true });
    expect(() => parseServerConfig(JSON.stringify({ ...base, telemetry: { content: true } }), 'runestream.json')).toThrow(
      /^runestream\.json: telemetry: Unrecognized key: "content"/,
    );
    expect(() => parseServerConfig(JSON.stringify({ ...base, telemetry: { captureContent: 'yes' } }), 'runestream.json')).toThrow(
      /^runestream\.json: telemetry\.captureContent: /,
    );
  });

  it('reads the chats and toolCalls timeouts, and refuses one out of range or misspelt naming the field', () => {
    const base = { models: { offline: { type: 'demo' } }, agents: { a: { model: 'offline' } }, defaultRole: 'a' };
    const parsed = parseServerConfig(JSON.stringify({ ...base, chats: { inactivityTimeoutMs: 4000 }, toolCalls: { approvalTimeoutMs: 3000 } }), 'runestream.json');
    expect([parsed.chats, parsed.toolCalls]).toEqual([{ inactivityTimeoutMs: 4000 }, { approvalTimeoutMs: 3000 }]);
    expect(() => parseServerConfig(JSON.stringify({ ...base, chats: { inactivityTimeoutMs: 5 } }), 'runestream.json')).toThrow(
      /^runestream\.json: chats\.inactivityTimeoutMs: /,
    );
    expect(() => parseServerConfig(JSON.stringify({ ...base, toolCalls: { approvalTimeout: 3000 } }), 'runestream.json')).toThrow(
      /^runestream\.json: toolCalls: Unrecognized key: "approvalTimeout"/,
    );
  });

  it("toolCalls.maxResultBytes bounds each message of the roles' MCP servers, counted while it is read", async () => {
    const config = parseServerConfig(JSON.stringify({ ...good, toolCalls: { maxResultBytes: 4096 } }), 'runestream.json');
    expect(config.toolCalls).toEqual({ maxResultBytes: 4096 });
    const agents = await configuredAgents(config, { LOCAL_KEY: 'k' }, { mcpStderr: 'ignore' });
    try {
      const big = agents.profiles.researcher!.tools!.find((tool) => tool.name === 'files__big')!;
      expect(big.maxResultBytes).toBe(4096);
      const run = { signal: new AbortController().signal, progress: () => {} };
      await expect(big.execute({ bytes: 100_000 }, run)).rejects.toThrow(
        /^tool result too large: MCP tool "files__big" returned 1000\d\d bytes, over 4096 \(maxResultBytes\)$/,
      );
    } finally {
      await agents.close();
    }
    expect(() => parseServerConfig(JSON.stringify({ ...good, toolCalls: { maxResultBytes: 10 } }), 'runestream.json')).toThrow(
      /^runestream\.json: toolCalls\.maxResultBytes: /,
    );
  });

  it('refuses an MCP server over a URL with a clear error', () => {
    expect(issuesOf(withAgent({ tools: ['web'], mcpServers: { web: { command: 'x', url: 'http://127.0.0.1:9000/mcp' } } }))).toEqual([
      'agents.assistant.mcpServers.web.url: an MCP server over a URL (HTTP or SSE) is not supported: give its stdio "command" (with "args" and "env") instead',
    ]);
  });

  it('refuses text that is not JSON, and a file over its size limit, before parsing it', () => {
    expect(issuesOf('{"models": ')[0]).toMatch(/^: not JSON: /);
    expect(issuesOf(' '.repeat(MAX_CONFIG_BYTES + 1))).toEqual([`: the file is ${MAX_CONFIG_BYTES + 1} bytes; at most ${MAX_CONFIG_BYTES} are read`]);
  });
});

describe('configuredAgents', () => {
  it('makes chains (one object per name, providers named after their models), a profile per role, and the default role’s agentEpics options', async () => {
    const agents = await configuredAgents(parseServerConfig(JSON.stringify(good), 'runestream.json'), { LOCAL_KEY: 'k' }, { mcpStderr: 'ignore' });
    try {
      const main = agents.chains.main!;
      expect(main.providers.map((provider) => provider.name)).toEqual(['local', 'offline']);
      expect(main).toMatchObject({ callTimeoutMs: 30_000 });
      expect(main.providers[0]!.breaker).toEqual({ failureThreshold: 2, openTimeoutMs: 10_000, halfOpenMaxCalls: 2 });
      expect(agents.chains.local!.providers[0]).toBe(main.providers[0]); // one provider, one breaker, whatever chain it is in
      expect(agents.description).toBe('chain "main": local (llama3.2 at http://127.0.0.1:11434/v1), then offline (the offline scripted demo model)');
      expect(agents.defaultRole).toBe('assistant');
      expect(agents.defaults).toEqual({ model: main, tools: agents.profiles.assistant!.tools, system: 'Be brief.' });
      expect(agents.profiles.assistant).toMatchObject({ model: main, description: 'Answers questions.', budget: { outputTokens: 10_000, modelCalls: 20 } });
      expect(agents.profiles.assistant!.tools!.map((tool) => tool.name)).toEqual(['clock', 'add']);
      // The MCP server's tools, named after the server.
      expect(agents.profiles.researcher!.tools!.map((tool) => tool.name)).toEqual(expect.arrayContaining(['files__echo', 'files__add']));

      // The scripted model answers, cycling.
      const engine = createEngine();
      const call = () =>
        lastValueFrom(
          chainCall$(agents.chains.canned!, { messages: [{ role: 'user', content: 'hi' }], tools: {} }, { snapshot: engine.snapshot, scheduler: asyncScheduler }).pipe(
            toArray(),
          ),
        );
      for (let i = 0; i < 2; i++) {
        const parts = (await call()).flatMap((out) => (out.type === 'part' ? [out.part] : [])) as ModelPart[];
        expect(parts.flatMap((part) => (part.type === 'text-delta' ? [part.text] : [])).join('')).toBe('Canned answer.');
      }
      // Served for as long as the server runs: no call (and its prompt) is kept.
      expect((agents.chains.canned!.providers[0]!.model as ScriptedModel).doStreamCalls).toEqual([]);
      await engine.close();
    } finally {
      await agents.close();
    }
  });

  it('refuses a model whose API key variable is not set, naming the variable and the field (config_invalid)', async () => {
    const config = parseServerConfig(JSON.stringify({ ...good, agents: { assistant: good.agents.assistant } }), 'runestream.json');
    await expect(configuredAgents(config, {}, { source: 'runestream.json' })).rejects.toMatchObject({
      code: 'config_invalid',
      message: 'runestream.json: models.local.apiKeyEnv: the environment variable LOCAL_KEY is not set: set it to the API key',
    });
  });
});

describe('clis', () => {
  const cline = { protocol: 'ndjson', command: 'cline', args: ['--verbose'], env: { CLINE_NO_AUTO_UPDATE: '1' }, cwd: 'work', idleTimeoutMs: 60_000, killGraceMs: 2_000 };
  const kilo = { protocol: 'acp', command: '/usr/local/bin/kilo', args: ['acp'], cwd: '/srv/code' };
  const withClis = (extra: Record<string, unknown>) => ({ ...good, ...extra });
  const adapter = (protocol: 'ndjson' | 'acp'): AgentCliAdapter => ({ protocol, interactive: protocol === 'acp', launch: () => ({ args: [] }), drive: () => EMPTY });
  const adapters = { ndjson: adapter('ndjson'), acp: adapter('acp') };

  it('accepts CLIs by name with their defaults, and a defaultCli naming one of them', () => {
    const config = parseServerConfig(JSON.stringify(withClis({ clis: { cline, kilo }, defaultCli: 'kilo' })), 'runestream.json');
    expect(config.clis).toEqual({ cline, kilo: { ...kilo, env: {} } });
    expect(config.defaultCli).toBe('kilo');
    expect(parseServerConfig(JSON.stringify(good), 'x').clis).toBeUndefined();
  });

  it('refuses a defaultCli that names no configured CLI, naming the field (config_invalid)', () => {
    expect(issuesOf(withClis({ clis: { cline }, defaultCli: 'claude' }))).toEqual(['defaultCli: unknown CLI "claude"; the CLIs are "cline"']);
    expect(issuesOf(withClis({ defaultCli: 'toString' }))).toEqual(['defaultCli: unknown CLI "toString"; the CLIs are (none)']);
  });

  it('refuses bad CLIs: an unknown protocol or key, no command or cwd, a bad name or env name, limits out of range', () => {
    expect(issuesOf(withClis({ clis: { cline: { ...cline, protocol: 'stdio' } } }))).toEqual(['clis.cline.protocol: Invalid option: expected one of "ndjson"|"acp"']);
    expect(issuesOf(withClis({ clis: { cline: { ...cline, shell: true } } }))).toEqual(['clis.cline: Unrecognized key: "shell"']);
    const { command: _, cwd: __, ...bare } = cline;
    expect(issuesOf(withClis({ clis: { cline: bare } }))).toEqual([
      'clis.cline.command: Invalid input: expected string, received undefined',
      'clis.cline.cwd: Invalid input: expected string, received undefined',
    ]);
    expect(issuesOf(withClis({ clis: { 'bad name': cline } }))).toEqual(['clis.bad name: must be 1 to 64 letters, digits, "_", "-" or "." (starting with a letter or digit)']);
    expect(issuesOf(withClis({ clis: { cline: { ...cline, env: { 'NOT-A-NAME': 'x' } } } }))).toEqual([
      'clis.cline.env.NOT-A-NAME: must be an environment variable name such as OPENAI_API_KEY',
    ]);
    expect(issuesOf(withClis({ clis: { cline: { ...cline, idleTimeoutMs: 0, killGraceMs: 3_600_000 } } }))).toEqual([
      'clis.cline.idleTimeoutMs: Too small: expected number to be >0',
      'clis.cline.killGraceMs: Too big: expected number to be <=600000',
    ]);
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`cli${i}`, cline]));
    expect(issuesOf(withClis({ clis: many }))).toEqual(['clis: at most 64 CLIs']);
  });

  it("configuredClis gives each CLI its protocol's adapter and a cwd resolved against the config folder", () => {
    const config = parseServerConfig(JSON.stringify(withClis({ clis: { cline, kilo }, defaultCli: 'cline' })), 'runestream.json');
    const { clis, defaultCli } = configuredClis(config, adapters, { configDir: '/etc/runestream' });
    expect(defaultCli).toBe('cline');
    expect(clis.cline).toEqual({
      adapter: adapters.ndjson,
      command: 'cline',
      args: ['--verbose'],
      env: { CLINE_NO_AUTO_UPDATE: '1' },
      cwd: '/etc/runestream/work',
      idleTimeoutMs: 60_000,
      killGraceMs: 2_000,
    });
    expect(clis.kilo).toEqual({ adapter: adapters.acp, command: '/usr/local/bin/kilo', args: ['acp'], env: {}, cwd: '/srv/code' });
    expect(configuredClis(config, adapters).clis.cline?.cwd).toBe(join(process.cwd(), 'work'));
  });

  it('configuredClis defaults to the only CLI, and to none among several or none', () => {
    const parse = (extra: Record<string, unknown>) => parseServerConfig(JSON.stringify(withClis(extra)), 'x');
    expect(configuredClis(parse({ clis: { cline } }), adapters).defaultCli).toBe('cline');
    expect(configuredClis(parse({ clis: { cline, kilo } }), adapters).defaultCli).toBeUndefined();
    expect(configuredClis(parse({}), adapters)).toEqual({ clis: {} });
  });

  it('log takes maxRepeats and repeatWindowMs beside level; an out-of-range one is refused by name', () => {
    expect(parseServerConfig(JSON.stringify(withClis({ log: { level: 'warn', maxRepeats: 5, repeatWindowMs: 60_000 } })), 'x').log).toEqual({
      level: 'warn',
      maxRepeats: 5,
      repeatWindowMs: 60_000,
    });
    expect(issuesOf(withClis({ log: { maxRepeats: 0, repeatWindowMs: 10 } }))).toEqual([
      'log.maxRepeats: Too small: expected number to be >0',
      'log.repeatWindowMs: Too small: expected number to be >=100',
    ]);
  });

  it('cliSessions caps the CLI processes running at once: configuredClis hands its limits on; a cap that is not a positive integer is refused by name', () => {
    const config = parseServerConfig(JSON.stringify(withClis({ clis: { cline }, cliSessions: { maxRunningSessions: 8, maxSessionsPerIdentity: 2 } })), 'x');
    expect(configuredClis(config, adapters)).toMatchObject({ defaultCli: 'cline', maxRunningSessions: 8, maxSessionsPerIdentity: 2 });
    expect(issuesOf(withClis({ clis: { cline }, cliSessions: { maxRunningSessions: 0, maxSessionsPerIdentity: 1.5, perUser: 1 } }))).toEqual([
      'cliSessions.maxRunningSessions: Too small: expected number to be >0',
      'cliSessions.maxSessionsPerIdentity: Invalid input: expected int, received number',
      'cliSessions: Unrecognized key: "perUser"',
    ]);
  });
});

describe('configured MCP servers and spawnable machines (issue 26, item 1)', () => {
  const files = { command: process.execPath, args: ['--import', 'tsx', mcpServer], env: { MCP_FIXTURE_LOG: '' } };

  it("a role names a top-level MCP server by name, and its tools are the role's; spawnable names machines; clientRegistration needs agent-registration spawnable", async () => {
    const config = parseServerConfig(JSON.stringify({ ...withAgent({ tools: ['clock', 'files'] }), mcpServers: { files } }), 'runestream.json');
    const agents = await configuredAgents(config, { LOCAL_KEY: 'k' });
    try {
      expect(agents.profiles.assistant?.tools?.map((tool) => tool.name)).toContain('files__echo');
      expect(agents.mcpServers.shared).toEqual({ files: config.mcpServers!.files });
      expect(agents.mcpServers.roles?.researcher).toEqual(config.agents.researcher!.mcpServers);
    } finally {
      await agents.close();
    }
    expect(issuesOf({ ...good, spawnable: ['chat-actor', 'shell'] })[0]).toMatch(/^spawnable\[1\]: /);
    expect(issuesOf({ ...good, spawnable: ['chat-actor'], registry: { clientRegistration: true } })).toEqual([
      'spawnable: registry.clientRegistration is true, so it must list "agent-registration" (or leave spawnable unset)',
    ]);
  });
});
