import { z } from 'zod';
import { Budget, PriceTable } from '../../reducers/budget.js';
import { CircuitBreakerInput } from '../../reducers/circuit-breaker/schema.js';
import { ErrorThreshold } from '../../reducers/conversation/schema.js';
import { BUILTIN_TOOL_NAMES } from '../../effects/tools/builtin-tools.js';
import { DeltaFlushMs } from '../../effects/agent/agent-model.js';
import { CliSessionLimits } from '../../effects/cli/cli-session-limits.js';
import { ArchivalConfig } from './archival-config.js';
import { AgentConfig, ConfigName, EnvName, McpServerConfig } from '../../reducers/agent-registration/definition.js';
import { machines } from '../../reducers/machines.js';

/** The largest configuration file {@link parseServerConfig} reads: 1 MiB. */
export const MAX_CONFIG_BYTES = 1 << 20;

/** A name in the file: see {@link ConfigName}. */
const Name = ConfigName;
const Text = (max: number) => z.string().max(max);

/**
 * A model's circuit breaker settings (its stream `provider/<name>`), each defaulted:
 * `failureThreshold` 3, `successThreshold` 1, `openTimeoutMs` 30,000, `halfOpenMaxCalls` 1 (trial
 * calls HALF_OPEN lets through at once, over every chain the model is in). Edited settings apply
 * at the next start, recorded as a `settings_changed` rune.
 */
const BreakerConfig = CircuitBreakerInput.partial().strict();

/** An OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, ...). */
const OpenAICompatibleModel = z.strictObject({
  type: z.literal('openai-compatible'),
  /** The API's base URL, e.g. `http://localhost:11434/v1`. */
  baseURL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as http://localhost:11434/v1' }),
  /** The model's name at that server, e.g. `llama3.2`. */
  model: z.string().min(1).max(256),
  /** The environment variable holding the API key; the file never holds the key itself. Default: no key. */
  apiKeyEnv: EnvName.optional(),
  breaker: BreakerConfig.optional(),
});

/** One scripted answer: text, tool calls, or an error (the offline `scriptedModel`). */
const ScriptedAnswer = z.strictObject({
  text: Text(100_000).optional(),
  toolCalls: z
    .array(z.strictObject({ toolName: z.string().min(1).max(128), input: z.record(z.string(), z.unknown()).default({}) }))
    .max(32)
    .optional(),
  error: Text(10_000).optional(),
});

/**
 * A model: an OpenAI-compatible server, `demo` (the offline demo model, which calls the built-in
 * tools), or `scripted` (answers in order, then over again: offline tests and demos); each with
 * its `breaker` settings.
 */
export const ModelConfig = z.discriminatedUnion('type', [
  OpenAICompatibleModel,
  z.strictObject({ type: z.literal('demo'), breaker: BreakerConfig.optional() }),
  z.strictObject({ type: z.literal('scripted'), answers: z.array(ScriptedAnswer).min(1).max(1000), breaker: BreakerConfig.optional() }),
]);
export type ModelConfig = z.infer<typeof ModelConfig>;

/** A provider fallback chain (seed 002): models tried in order, each behind its own circuit breaker (its settings are the model's `breaker`). */
export const ChainConfig = z.strictObject({
  /** Model names, in order of preference. */
  models: z.array(Name).min(1).max(16),
  /** Refused (`config_invalid`, naming `models.<name>.breaker`): a model's breaker is one, whatever chains it is in. */
  breaker: z.unknown().optional(),
  /** Each provider's call fails if it produces nothing for this long. Default 120,000 ms. */
  callTimeoutMs: z.number().int().positive().optional(),
});
export type ChainConfig = z.infer<typeof ChainConfig>;

// An MCP server's and a role's schemas are the agent registry's definitions' (one source).
export { AgentConfig, McpServerConfig };

/** The largest {@link CliConfig.idleTimeoutMs}: a day. */
const MAX_CLI_IDLE_TIMEOUT_MS = 86_400_000;
/** The largest {@link CliConfig.killGraceMs}: ten minutes. */
const MAX_CLI_KILL_GRACE_MS = 600_000;
/** The most agent CLIs one file configures. */
const MAX_CLIS = 64;

/**
 * An agent CLI the server may run for agent-manager sessions (seed 001): a client names it, never
 * its command. `cwd` is resolved by `configuredClis` (relative to the configuration file's folder).
 */
export const CliConfig = z.strictObject({
  /** `ndjson`: cline 2.x `--json`. `acp`: the Agent Client Protocol (cline 3 `--acp`, `kilo acp`). */
  protocol: z.enum(['ndjson', 'acp']),
  /** The executable, found on PATH or given as a path. */
  command: z.string().min(1).max(4096),
  /** Arguments before the protocol's own (`acp` for `kilo`, `--acp` for cline 3). */
  args: z.array(Text(4096)).max(256).default([]),
  /** Variables added to the few safe ones of the server's own (PATH, HOME, ...): the server's secrets reach a CLI only when named here. */
  env: z.record(EnvName, Text(32_768)).default({}),
  /** The working directory of its processes: where it reads and writes files. */
  cwd: z.string().min(1).max(4096),
  /** A process that prints nothing for this long while it works (not while its session waits for a person) is ended with `process_error`. Default 600,000 (10 minutes). */
  idleTimeoutMs: z.number().int().positive().max(MAX_CLI_IDLE_TIMEOUT_MS).optional(),
  /** How long an ended process gets between SIGTERM and SIGKILL. Default 5,000. */
  killGraceMs: z.number().int().positive().max(MAX_CLI_KILL_GRACE_MS).optional(),
});
export type CliConfig = z.infer<typeof CliConfig>;

/**
 * The autonomy loop (seed 003) of `runestream serve`: a client spawns `conv/<c>/plan/<p>`
 * (`autonomy-loop`, input `{goal}`) and the loop plans, runs and reviews it with these settings.
 */
export const AutonomyConfig = z.strictObject({
  /** The planner's chain or model. */
  planner: Name,
  /** The critic's chain or model. Default: the planner's. */
  critic: Name.optional(),
  /** How many tasks of a plan run at once. Default 4. */
  parallelism: z.number().int().positive().max(256).optional(),
  /** Whether a plan starts as soon as it is made; else a client sends `plan_approved`. Default false. */
  autoStart: z.boolean().optional(),
  /** Planner (and critic) calls before the loop stops with why. Default 3. */
  maxPlannerAttempts: z.number().int().positive().max(20).optional(),
  /** Runs of a task, its first included. Default 3. */
  maxTaskAttempts: z.number().int().positive().max(100).optional(),
  /** Replans the critic may ask for. Default 2. */
  maxReplans: z.number().int().nonnegative().max(100).optional(),
  /** How long a blocked plan waits for a `retry_task`. Default 600,000 ms. */
  blockedTimeoutMs: z.number().int().positive().optional(),
  /** How long an executing plan may go with no rune of its own or of its tasks' agents before it stops as stalled. Default 600,000 ms. */
  executingStallMs: z.number().int().positive().optional(),
  /** Limits on the conversation's usage while a plan executes. */
  budget: Budget.optional(),
});
export type AutonomyConfig = z.infer<typeof AutonomyConfig>;

/** The levels of the log `runestream serve` writes (pino's), least severe first: `log.level` and `--log-level`. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The largest `metrics.flushEveryMs` and `metrics.archiveEveryMs`: a week. */
const MAX_METRICS_INTERVAL_MS = 7 * 86_400_000;

/**
 * The metrics of `runestream serve`: `GET /metrics` and the collector that writes a snapshot to
 * a file on schedule. Every key has a default; `{}` (or no `metrics` key) is all of them.
 */
export const MetricsConfig = z.strictObject({
  /** Whether `/metrics` is served and the collector runs. Default true. */
  enabled: z.boolean().default(true),
  /** A snapshot (JSON) is written to `file` every this many ms. Default 15,000. */
  flushEveryMs: z.number().int().positive().max(MAX_METRICS_INTERVAL_MS).optional(),
  /** The collector's ARCHIVING comes this often, once archival is wired in. Default 3,600,000. */
  archiveEveryMs: z.number().int().nonnegative().max(MAX_METRICS_INTERVAL_MS).optional(),
  /** The snapshot file, relative to the configuration file's folder. Default `runestream-metrics.json`. */
  file: z.string().min(1).max(4096).optional(),
});
export type MetricsConfig = z.infer<typeof MetricsConfig>;

/**
 * OpenTelemetry spans of `runestream serve` (see `tracingEpic`): through the global tracer
 * provider, so they go wherever an SDK the application registers sends them (e.g. one started by
 * `node --import ./otel.mjs`), and nowhere without one.
 */
export const TelemetryConfig = z.strictObject({
  /** Whether turns, model calls and tool calls are traced. Default true (a no-op with no SDK registered). */
  enabled: z.boolean().default(true),
  /** Whether prompts, answers, tool arguments and results are recorded on the spans. Default false. */
  captureContent: z.boolean().default(false),
});
export type TelemetryConfig = z.infer<typeof TelemetryConfig>;

/**
 * The agent registry of `runestream serve`: each role of `agents` is registered at start as
 * `agent-def/<role>` and activated by real checks (its model answers, its MCP servers start, its
 * tools' schemas compile); only an ACTIVE role's agents start. Retries of a failed activation back off.
 */
export const RegistryConfig = z.strictObject({
  /** Retries of a failed activation before the agent is DECOMMISSIONED. Default 3. */
  maxAttempts: z.number().int().positive().max(100).optional(),
  /** The delay before the first retry, in ms, doubling after each. Default 5,000. */
  retryBaseMs: z.number().int().nonnegative().max(86_400_000).optional(),
  /** The longest delay between retries, in ms. Default 300,000 (or `retryBaseMs`, if that is longer). */
  retryMaxMs: z.number().int().nonnegative().max(86_400_000).optional(),
  /**
   * Whether clients may register definitions over the protocol (spawn `agent-def/<name>` as
   * `agent-registration`): it adds `agent-registration` to the default `spawnable`. Such a
   * definition names MCP servers only by name, from the top-level `mcpServers`. Default false.
   */
  clientRegistration: z.boolean().optional(),
});
export type RegistryConfig = z.infer<typeof RegistryConfig>;

/** The most MCP servers the top-level `mcpServers` declares. */
const MAX_MCP_SERVERS = 64;

/** Every machine a configuration may name (`spawnable`). */
const MachineId = z.enum(Object.keys(machines) as [keyof typeof machines, ...(keyof typeof machines)[]]);

/**
 * The machines clients of `runestream serve` may spawn when `spawnable` is not set: every seed
 * machine but the server's own bookkeeping (`circuit-breaker`, `metrics-collector`, `archival`:
 * their streams are written by the server's effects, and an `archival` stream archives the stream
 * it names) and `agent-registration` (added by `registry.clientRegistration`).
 */
export const DEFAULT_SPAWNABLE: readonly string[] = Object.keys(machines).filter(
  (id) => !['circuit-breaker', 'metrics-collector', 'archival', 'agent-registration'].includes(id),
);

/** The machines clients may spawn as `config` says: its `spawnable`, else {@link DEFAULT_SPAWNABLE} (plus `agent-registration` with `registry.clientRegistration`). */
export const spawnableOf = (config: Pick<ServerConfig, 'spawnable' | 'registry'>): readonly string[] =>
  config.spawnable ?? [...DEFAULT_SPAWNABLE, ...(config.registry?.clientRegistration === true ? ['agent-registration'] : [])];

/** A timeout of the configuration, in ms: from 100 ms to 7 days. */
const TimeoutMs = z
  .number()
  .int()
  .min(100)
  .max(7 * 86_400_000);

/**
 * The largest message an MCP server may send (a call's result), counted while it is read: past it
 * the call ends with `execution_error` "tool result too large" and the rest is dropped unread
 * (1 KiB to 1 GiB; default 1,000,000, see `connectMcp`).
 */
const ToolResultBytes = z
  .number()
  .int()
  .min(1024)
  .max(2 ** 30);

/**
 * `runestream serve`'s configuration file (JSON): the models and their fallback chains, the
 * agents by role, prices, and the limits of a conversation. One schema, and the single source of
 * its type. Unknown keys are refused, so a misspelt key is an error, not a silent default.
 *
 * ## Example
 * ```ts
 * import { parseServerConfig } from 'runestream/server';
 * const config = parseServerConfig(
 *   JSON.stringify({
 *     models: { local: { type: 'openai-compatible', baseURL: 'http://localhost:11434/v1', model: 'llama3.2', breaker: { failureThreshold: 2 } }, offline: { type: 'demo' } },
 *     chains: { main: { models: ['local', 'offline'] } },
 *     agents: { assistant: { model: 'main', tools: ['clock'] } },
 *     defaultRole: 'assistant',
 *   }),
 *   'runestream.json',
 * );
 * console.log(config.chains.main?.models, config.agents.assistant?.tools);
 * // Logs: [ 'local', 'offline' ] [ 'clock' ]
 * ```
 */
export const ServerConfig = z
  .strictObject({
    /** Models by name: each is a provider, with its own breaker stream `provider/<name>` and its settings (`breaker`). */
    models: z.record(Name, ModelConfig).refine((models) => Object.keys(models).length > 0, 'needs at least one model'),
    /** Provider fallback chains by name (names must differ from the models'). */
    chains: z.record(Name, ChainConfig).default({}),
    /**
     * MCP servers by name, which any role's `tools` (and any definition registered over the
     * protocol) may name: the only way a registered definition gets an MCP server. Default: none.
     */
    mcpServers: z
      .record(Name, McpServerConfig)
      .refine((servers) => Object.keys(servers).length <= MAX_MCP_SERVERS, `at most ${MAX_MCP_SERVERS} MCP servers`)
      .optional(),
    /**
     * The machines clients may spawn (`{op: "spawn"}`); a spawn of another is refused `forbidden`
     * naming the machine. Default {@link DEFAULT_SPAWNABLE}: every machine but `circuit-breaker`,
     * `metrics-collector`, `archival` and `agent-registration` (which `registry.clientRegistration` adds).
     */
    spawnable: z.array(MachineId).max(64).optional(),
    /** Agents by role. */
    agents: z.record(Name, AgentConfig).refine((agents) => Object.keys(agents).length > 0, 'needs at least one agent'),
    /** The role of an agent spawned without one (and of `runestream serve`'s agent streams). */
    defaultRole: Name,
    /** Prices per million tokens, by model name: what a usage's `cost` is computed from. */
    prices: PriceTable.default({}),
    /** Limits on each conversation, over all its agents. */
    conversationBudget: Budget.optional(),
    /** Turns of a conversation that may end in error in a row before it is suspended (`error_threshold`): 1 to 1,000. Default 5. */
    errorThreshold: ErrorThreshold.optional(),
    /** How often a model's streamed text is appended: the first delta at once, then at most one `turn.assistant_delta` per this many ms (0: a rune per delta; up to 10,000). Default 50. */
    deltaFlushMs: DeltaFlushMs.optional(),
    /** Limits on sub-agents: how deep delegation nests (the root agent is depth 0) and how many agents a conversation has. */
    delegation: z.strictObject({ maxDepth: z.number().int().positive().max(64).optional(), maxAgents: z.number().int().positive().max(10_000).optional() }).optional(),
    /** Agent CLIs by name: the only commands an agent-manager session runs. */
    clis: z
      .record(Name, CliConfig)
      .refine((clis) => Object.keys(clis).length <= MAX_CLIS, `at most ${MAX_CLIS} CLIs`)
      .optional(),
    /** The CLI of a session that names none; one of `clis`. Default: the only CLI, when there is one. */
    defaultCli: Name.optional(),
    /** How many CLI processes run at once: `maxRunningSessions` in total (default 16), `maxSessionsPerIdentity` for one identity (default 4). */
    cliSessions: CliSessionLimits.optional(),
    /** The autonomy loop: its planner and critic, and its limits. Default: none (a plan stream gets no planner). */
    autonomy: AutonomyConfig.optional(),
    /** Archival and retention: the cold store (a folder relative to the file, or S3), retention policies. Default: none. */
    archival: ArchivalConfig.optional(),
    /** The agent registry: each role becomes a registration checked before its agents start. Default: none (agents start unchecked). */
    registry: RegistryConfig.optional(),
    /** Metrics: `GET /metrics` and a snapshot file. Default: enabled, with every default of {@link MetricsConfig}. */
    metrics: MetricsConfig.optional(),
    /** Tracing: OpenTelemetry spans of turns, model calls and tool calls. Default: enabled, content off. */
    telemetry: TelemetryConfig.optional(),
    /** Chat actors (seed 000): how long one idle or paused lasts before `InactivityTimeout`, and before a running one is seen stale. Default 600,000 ms each. */
    chats: z.strictObject({ inactivityTimeoutMs: TimeoutMs.optional(), staleAfterMs: TimeoutMs.optional() }).optional(),
    /** Tool calls: how long one waits for approval before `approval_timeout` (default 600,000 ms), and `maxResultBytes` (see {@link ToolResultBytes}). */
    toolCalls: z.strictObject({ approvalTimeoutMs: TimeoutMs.optional(), maxResultBytes: ToolResultBytes.optional() }).optional(),
    /**
     * The serve log: the least severe `level` written (`--log-level` outranks it; default `info`);
     * lines of one kind from one source written per `repeatWindowMs` (default 10,000 ms, 100 ms to
     * a day), `maxRepeats` (default 10): the rest are counted, then one line says how many.
     */
    log: z
      .strictObject({
        level: z.enum(LOG_LEVELS).optional(),
        maxRepeats: z.number().int().positive().max(1_000_000).optional(),
        repeatWindowMs: z.number().int().min(100).max(86_400_000).optional(),
      })
      .optional(),
  })
  .superRefine((config, context) => {
    const issue = (path: PropertyKey[], message: string): void => context.addIssue({ code: 'custom', path, message });
    const models = new Set(Object.keys(config.models));
    const chains = new Set(Object.keys(config.chains));
    for (const name of chains) if (models.has(name)) issue(['chains', name], `"${name}" names a model too: a chain's name must differ from every model's`);
    for (const [name, chain] of Object.entries(config.chains)) {
      if (chain.breaker !== undefined) {
        issue(
          ['chains', name, 'breaker'],
          `a chain has no breaker: each model has its own, whatever chains it is in; set ${chain.models.map((model) => `models.${model}.breaker`).join(', ')}`,
        );
      }
      chain.models.forEach((model, index) => {
        if (!models.has(model)) issue(['chains', name, 'models', index], `unknown model "${model}"; the models are ${list(models)}`);
        else if (chain.models.indexOf(model) !== index) issue(['chains', name, 'models', index], `model "${model}" appears twice in the chain`);
      });
    }
    const builtin = new Set<string>(BUILTIN_TOOL_NAMES);
    for (const [role, agent] of Object.entries(config.agents)) {
      if (!models.has(agent.model) && !chains.has(agent.model)) {
        issue(['agents', role, 'model'], `unknown chain or model "${agent.model}"; the chains are ${list(chains)}, the models ${list(models)}`);
      }
      agent.tools.forEach((tool, index) => {
        if (!builtin.has(tool) && !Object.hasOwn(agent.mcpServers, tool) && !Object.hasOwn(config.mcpServers ?? {}, tool)) {
          issue(
            ['agents', role, 'tools', index],
            `unknown tool "${tool}": not a built-in tool (${list(builtin)}), one of this agent's mcpServers (${list(Object.keys(agent.mcpServers))}) nor of the configuration's (${list(Object.keys(config.mcpServers ?? {}))})`,
          );
        } else if (agent.tools.indexOf(tool) !== index) issue(['agents', role, 'tools', index], `tool "${tool}" appears twice`);
      });
    }
    // A client tool is one tool wherever it is declared: the same name must mean the same declaration.
    const clientTools = new Map<string, string>();
    for (const [role, agent] of Object.entries(config.agents)) {
      (agent.clientTools ?? []).forEach((tool, index) => {
        if (builtin.has(tool.name)) issue(['agents', role, 'clientTools', index, 'name'], `"${tool.name}" is a built-in tool's name`);
        const declared = JSON.stringify(tool);
        const other = clientTools.get(tool.name);
        if (other !== undefined && other !== declared) issue(['agents', role, 'clientTools', index], `client tool "${tool.name}" is declared differently by another role`);
        clientTools.set(tool.name, declared);
      });
    }
    for (const key of ['planner', 'critic'] as const) {
      const name = config.autonomy?.[key];
      if (name !== undefined && !models.has(name) && !chains.has(name)) {
        issue(['autonomy', key], `unknown chain or model "${name}"; the chains are ${list(chains)}, the models ${list(models)}`);
      }
    }
    if (!(config.defaultRole in config.agents)) issue(['defaultRole'], `unknown role "${config.defaultRole}"; the roles are ${list(Object.keys(config.agents))}`);
    for (const model of Object.keys(config.prices)) {
      if (!models.has(model)) issue(['prices', model], `unknown model "${model}"; the models are ${list(models)}`);
    }
    if (config.registry?.clientRegistration === true && config.spawnable !== undefined && !config.spawnable.includes('agent-registration')) {
      issue(['spawnable'], 'registry.clientRegistration is true, so it must list "agent-registration" (or leave spawnable unset)');
    }
    const { retryBaseMs, retryMaxMs } = config.registry ?? {};
    if (retryBaseMs !== undefined && retryMaxMs !== undefined && retryMaxMs < retryBaseMs) issue(['registry', 'retryMaxMs'], `must be at least retryBaseMs (${retryBaseMs})`);
    if (config.defaultCli !== undefined && !Object.hasOwn(config.clis ?? {}, config.defaultCli)) {
      issue(['defaultCli'], `unknown CLI "${config.defaultCli}"; the CLIs are ${list(Object.keys(config.clis ?? {}))}`);
    }
  });
export type ServerConfig = z.infer<typeof ServerConfig>;

const list = (names: Iterable<string>): string => {
  const all = [...names].map((name) => `"${name}"`);
  return all.length === 0 ? '(none)' : all.join(', ');
};

/** One thing wrong with a configuration: where (a field path such as `agents.coder.tools[1]`) and what. */
export interface ServerConfigIssue {
  readonly path: string;
  readonly message: string;
}

/**
 * A configuration file that cannot be used: code `config_invalid`. The message names the file and,
 * for each issue, the field path: `runestream.json: agents.coder.model: unknown chain or model "gpt"; ...`.
 */
export class ServerConfigError extends Error {
  override readonly name = 'ServerConfigError';
  readonly code = 'config_invalid';
  constructor(
    /** Where the configuration came from: a file's path, or a description such as `RUNESTREAM_MODELS`. */
    readonly source: string,
    readonly issues: readonly ServerConfigIssue[],
  ) {
    super(issues.map((issue) => `${source}: ${issue.path === '' ? '' : `${issue.path}: `}${issue.message}`).join('\n'));
  }
}

/** A zod path as the file shows it: `agents.coder.tools[1]`. */
const pathText = (path: readonly PropertyKey[]): string =>
  path.map((key, index) => (typeof key === 'number' ? `[${key}]` : index === 0 ? String(key) : `.${String(key)}`)).join('');

/** An issue's message; a bad record key says what a name must be, not only that it is invalid. */
const messageOf = (issue: z.core.$ZodIssue): string => (issue.code === 'invalid_key' ? (issue.issues[0]?.message ?? issue.message) : issue.message);

/**
 * Parses and checks a server configuration: JSON text, at most {@link MAX_CONFIG_BYTES}, against
 * {@link ServerConfig}, with its cross-references (a chain naming an unknown model, an agent an
 * unknown chain or tool, the default role an unknown agent). Throws a {@link ServerConfigError}
 * (code `config_invalid`) naming `source` and each field path.
 *
 * ## Example
 * ```ts
 * import { parseServerConfig, ServerConfigError } from 'runestream/server';
 * const text = JSON.stringify({ models: { offline: { type: 'demo' } }, agents: { assistant: { model: 'gpt', tools: ['clock'] } }, defaultRole: 'assistant' });
 * try {
 *   parseServerConfig(text, 'runestream.json');
 * } catch (error) {
 *   if (error instanceof ServerConfigError) console.log(error.code, '-', error.message);
 * }
 * // Logs: config_invalid - runestream.json: agents.assistant.model: unknown chain or model "gpt"; the chains are (none), the models "offline"
 * ```
 */
export function parseServerConfig(text: string, source: string): ServerConfig {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_CONFIG_BYTES) throw new ServerConfigError(source, [{ path: '', message: `the file is ${bytes} bytes; at most ${MAX_CONFIG_BYTES} are read` }]);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ServerConfigError(source, [{ path: '', message: `not JSON: ${(error as Error).message}` }]);
  }
  const parsed = ServerConfig.safeParse(json);
  if (!parsed.success)
    throw new ServerConfigError(
      source,
      parsed.error.issues.map((issue) => ({ path: pathText(issue.path), message: messageOf(issue) })),
    );
  return parsed.data;
}
