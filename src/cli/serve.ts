import { dirname, resolve } from 'node:path';
import { agentEpics } from '../effects/agent/agent-epics.js';
import { agentProfiles } from '../effects/agent/agent-profiles.js';
import { reactAgentEpics } from '../effects/agent/react-agent-epics.js';
import { chatActorLifecycle } from '../effects/chat-actor-lifecycle.js';
import { chatTalk } from '../effects/chat-talk.js';
import { chatPartialResponse } from '../effects/chat-partial-response.js';
import { autonomyEpics } from '../effects/autonomy/autonomy-epics.js';
import { agentCliSessions } from '../effects/cli/agent-cli-sessions.js';
import { cliAdapters } from '../effects/cli/cli-adapters.js';
import { cliContainment } from '../effects/cli/cli-containment.js';
import { cliSessionOwners } from '../effects/cli/cli-session-owners.js';
import { agentRegistry } from '../effects/registry/agent-registry.js';
import { registeredAgentAdmission } from '../effects/registry/registered-admission.js';
import { registerDefinitions } from '../effects/registry/register-definitions.js';
import { agentRegistration, declaredAgentRegistration } from '../reducers/agent-registration/machine.js';
import { machines } from '../reducers/machines.js';
import { errorText } from '../reducers/error-text.js';
import { isRuneOf } from '../reducers/rune.js';
import { configuredAgents, type ConfiguredAgents } from '../server/config/configured-agents.js';
import { configuredClis } from '../server/config/configured-clis.js';
import { archivalEpic } from '../effects/archival/archival-epic.js';
import { archivalRoutes } from '../server/archival-routes.js';
import { agUiRoutes } from '../server/ag-ui/ag-ui-routes.js';
import { configuredArchival } from '../server/config/configured-archival.js';
import { createMetrics, type RunestreamMetrics } from '../effects/metrics/metrics.js';
import { tracingEpic } from '../effects/telemetry/tracing-epic.js';
import { METRICS_COLLECTOR_STREAM, metricsCollectorEpic } from '../effects/metrics/metrics-collector-epic.js';
import { fileMetricsSink, type MetricsSnapshot } from '../effects/metrics/metrics-sink.js';
import type { ColdStore } from '../streams/archive/cold-store.js';
import { writeMetricsSnapshot } from '../streams/archive/metrics-snapshot.js';
import { spawnableOf, type AutonomyConfig, type MetricsConfig, type ServerConfig } from '../server/config/server-config.js';
import { createServer, type RunestreamServer } from '../server/server.js';
import { tokenIdentities } from '../server/token-identities.js';
import { createEngine, type Engine } from '../streams/engine.js';
import type { Command } from './args.js';
import { openServeStore, type ServeStore } from './serve-store.js';
import { logServing, serveLogger } from './serve-log.js';

/** The autonomy loop's epics as configured: its models from the configured chains, a task's roles the configured agents'. */
function autonomyOf(autonomy: AutonomyConfig, agents: ConfiguredAgents, config: ServerConfig) {
  const { planner, critic, ...limits } = autonomy;
  const roles = Object.fromEntries(Object.entries(config.agents).map(([role, agent]) => [role, agent.description === undefined ? {} : { description: agent.description }]));
  return autonomyEpics({ ...limits, planner: agents.chains[planner]!, ...(critic === undefined ? {} : { critic: agents.chains[critic]! }), roles });
}

/**
 * The agent registry at start: every role registered (idempotently: an unchanged one is left as
 * it is, a changed one redefined), each outcome logged, and every later change of a registration's state.
 */
async function registerRoles(engine: Engine, config: ServerConfig, log: Pick<Console, 'log' | 'error'>): Promise<void> {
  engine.runes$().subscribe((rune) => {
    if (!isRuneOf(agentRegistration, rune) || rune.from === rune.to) return;
    const { reason, error } = rune.event as { reason?: string; error?: string };
    const why = reason ?? error;
    log.log(`runestream: agent registry: ${rune.stream} ${rune.from ?? 'spawned'} -> ${rune.to ?? ''}${why === undefined ? '' : ` (${why})`}`);
  });
  const definitions = Object.entries(config.agents).map(([name, agent]) => ({ name, ...agent }));
  for (const { name, outcome, state, reason } of await registerDefinitions(engine, definitions)) {
    log.log(`runestream: agent registry: "${name}" ${outcome}${state === undefined ? '' : ` (${state})`}${reason === undefined ? '' : `: ${reason}`}`);
  }
}

/**
 * The metrics as configured (none when `enabled` is false): their collector writes a snapshot to
 * `file`, relative to the configuration file's folder, or by default `runestream-metrics.json`
 * beside the SQLite log (with a PostgreSQL log, in the working folder, and each process's file
 * has its process id before the extension: `runestream-metrics-<pid>.json`); with a cold store
 * (archival configured) it archives one there on schedule.
 */
function metricsOf(
  config: MetricsConfig | undefined,
  configSource: string,
  db: string | undefined,
  cold: ColdStore | undefined,
  processId: string | undefined,
): { metrics: RunestreamMetrics; collector: ReturnType<typeof metricsCollectorEpic>; file: string } | undefined {
  if (config?.enabled === false) return undefined;
  const beside = db === undefined ? resolve('runestream-metrics.json') : resolve(dirname(resolve(db)), 'runestream-metrics.json');
  const named = config?.file === undefined ? beside : resolve(dirname(resolve(configSource)), config.file);
  // Processes sharing a PostgreSQL log each write their own file: the process id before its extension.
  const file = db === undefined ? named.replace(/(\.[^./]*)?$/, (extension) => `-${process.pid}${extension}`) : named;
  const metrics = createMetrics();
  const { flushEveryMs, archiveEveryMs } = config ?? {};
  const collector = metricsCollectorEpic({
    metrics,
    sink: fileMetricsSink(file),
    ...(processId === undefined ? {} : { stream: `${METRICS_COLLECTOR_STREAM}/${processId}` }),
    ...(flushEveryMs === undefined ? {} : { flushEveryMs }),
    ...(archiveEveryMs === undefined ? {} : { archiveEveryMs }),
    // With archival configured, the collector's ARCHIVING hands each snapshot to the cold store.
    ...(cold === undefined ? {} : { archiveSnapshot: async (snapshot: MetricsSnapshot) => void (await writeMetricsSnapshot(cold, snapshot, snapshot.at)) }),
  });
  return { metrics, collector, file };
}

/** A running `runestream serve`. */
export interface Serving {
  readonly engine: Engine;
  readonly server: RunestreamServer;
  /** Closes the server, then the engine (which flushes the log). */
  stop(): Promise<void>;
}

/**
 * `runestream serve`: a SQLite log, an engine with the chat actor's lifecycle and the configured
 * default agent (its provider chain, tools and tool-call recovery), and a server in front. Prints
 * where it listens (and, with no token, that it listens on loopback only) and which chain the
 * agent uses on `log`; from then on it logs with levels (`serve-log.ts`): engine errors nobody
 * waits for, failed model calls, tools and turns, connections (debug), shard ownership. `env`
 * holds the API keys the configuration names.
 */
export async function serve(command: Extract<Command, { command: 'serve' }>, log: Pick<Console, 'log' | 'error'>, env: NodeJS.ProcessEnv = process.env): Promise<Serving> {
  const { port, db, token, host, allowedOrigins } = command;
  // Several identities (--tokens-file): each may only what its entry says; one token may all.
  const identities = command.tokens === undefined ? undefined : tokenIdentities(command.tokens);
  const authorize = identities?.authorize;
  // With the registry, a role whose MCP server does not start is held in ERROR by its checks, not fatal.
  const onMcpFailure = (role: string, server: string, error: unknown): void =>
    log.error(`runestream: role "${role}": MCP server "${server}" did not start (${errorText(error)}); its tools are left out until a restart`);
  const agents = await configuredAgents(command.config, env, { source: command.configSource, ...(command.config.registry === undefined ? {} : { onMcpFailure }) });
  const { defaults } = agents;
  // CLIs come only from a configuration file: their relative `cwd` is the file's folder's.
  const clis = command.config.clis === undefined ? undefined : configuredClis(command.config, cliAdapters, { configDir: dirname(resolve(command.configSource)) });
  // Who started each CLI session's run, told by the server: what `maxSessionsPerIdentity` counts by.
  const owners = clis === undefined ? undefined : cliSessionOwners();
  // Archival, from a configuration file only: its cold folder is relative to the file's folder.
  const archival =
    command.config.archival === undefined
      ? undefined
      : configuredArchival(command.config.archival, { configDir: dirname(resolve(command.configSource)), source: command.configSource, env });
  const { registry } = command.config;
  // Every role's profile, the configured ones and those the registry adds at runtime; with more
  // than one configured role, agents delegate to them (the `delegate` tool).
  const profiles = agentProfiles({ fixed: agents.profiles, toolkit: agents.toolkit, delegation: Object.keys(agents.profiles).length > 1 });
  // With the registry, only an ACTIVE role's agents start (a client's root agent is the default role's).
  const admission = registry === undefined ? undefined : registeredAgentAdmission({ defaultRole: agents.defaultRole, profiles });
  let served: ServeStore;
  try {
    served = await openServeStore(command);
  } catch (error) {
    await agents.close();
    await archival?.close();
    throw error;
  }
  const { store } = served;
  // Each process sharing a PostgreSQL log runs a collector of its own, on a stream named after it.
  const metrics = metricsOf(command.config.metrics, command.configSource, command.store === undefined ? db : undefined, archival?.cold, served.processId);
  let engine: Engine;
  try {
    engine = createEngine({
      store,
      ...served.engineOptions,
      // A definition carrying an MCP server (a command) the configuration does not declare is refused at spawn and redefine.
      machines: { ...machines, [agentRegistration.id]: declaredAgentRegistration(agents.mcpServers) },
      ...(archival === undefined ? {} : { archive: archival.cold }),
      epics: [
        chatActorLifecycle(command.config.chats ?? {}),
        chatTalk(),
        ...agentEpics({
          ...defaults,
          agents: profiles,
          ...(command.config.delegation === undefined ? {} : { delegation: command.config.delegation }),
          // The default role's budget is every agent's without a role (a root spawned by a client).
          ...(agents.profiles[agents.defaultRole]?.budget === undefined ? {} : { budget: agents.profiles[agents.defaultRole]!.budget }),
          ...(command.config.conversationBudget === undefined ? {} : { conversationBudget: command.config.conversationBudget }),
          ...(command.config.errorThreshold === undefined ? {} : { errorThreshold: command.config.errorThreshold }),
          ...(command.config.deltaFlushMs === undefined ? {} : { deltaFlushMs: command.config.deltaFlushMs }),
          prices: agents.prices,
          ...(admission === undefined ? {} : { admission }),
          ...(command.config.toolCalls?.approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs: command.config.toolCalls.approvalTimeoutMs }),
        }),
        // Definitions registered at runtime become live roles of `profiles` while ACTIVE.
        ...(registry === undefined ? [] : [agentRegistry({ ...registry, chains: agents.chains, profiles, mcpServers: agents.mcpServers })]),
        // ReAct agents (seed 004) on the same chain, tools and prices, gated alike; the breakers are agentEpics'.
        ...reactAgentEpics({
          ...defaults,
          breakers: false,
          prices: agents.prices,
          ...(admission === undefined ? {} : { admission }),
          // The same budgets as agentEpics', so a ReAct model call is refused once they are used up.
          budgets: {
            ...(agents.profiles[agents.defaultRole]?.budget === undefined ? {} : { budget: agents.profiles[agents.defaultRole]!.budget }),
            ...(command.config.conversationBudget === undefined ? {} : { conversationBudget: command.config.conversationBudget }),
          },
        }),
        ...(command.config.autonomy === undefined ? [] : autonomyOf(command.config.autonomy, agents, command.config)),
        // Agent CLI sessions (seed 001): each `agent-manager-session` stream runs the configured CLI it names.
        ...(clis === undefined ? [] : [agentCliSessions({ ...clis, owners })]),
        ...(archival === undefined ? [] : [archivalEpic({ store, cold: archival.cold, ...archival.settings })]),
        ...(metrics === undefined ? [] : [metrics.collector]),
        // Spans go to the global tracer provider: an SDK the application registers (node --import) gets them.
        ...(command.config.telemetry?.enabled === false ? [] : [tracingEpic({ captureContent: command.config.telemetry?.captureContent ?? false })]),
      ],
    });
  } catch (error) {
    await store.close();
    await served.release();
    await agents.close();
    await archival?.close();
    throw error;
  }
  // From the store's heads, the breakers' states show before any new breaker rune (after a restart).
  const stopMetrics = metrics?.metrics.observe(engine, { store });
  const logger = serveLogger(command.logLevel ?? command.config.log?.level ?? 'info');
  const { maxRepeats, repeatWindowMs } = command.config.log ?? {};
  const stopLogging = logServing(engine, logger, served.leases, {
    ...(maxRepeats === undefined ? {} : { maxRepeats }),
    ...(repeatWindowMs === undefined ? {} : { repeatWindowMs }),
  });
  if (registry !== undefined) await registerRoles(engine, command.config, log);
  let server: RunestreamServer;
  try {
    server = await createServer({
      engine,
      port,
      host,
      allowedOrigins,
      partialResponse: chatPartialResponse(engine),
      inspector: { store },
      spawnable: spawnableOf(command.config),
      ...(identities !== undefined ? identities : token === undefined ? {} : { token }),
      routes: [
        // Every live role (the configured ones, and the registry's while ACTIVE) answers AG-UI at POST /agents/<role>/ag-ui, its turns under that role.
        ...agUiRoutes({ engine, agents: (role) => (profiles.get(role) === undefined ? undefined : { role }), ...(authorize === undefined ? {} : { authorize }) }),
        ...(archival === undefined ? [] : archivalRoutes({ engine, store, cold: archival.cold, ...(authorize === undefined ? {} : { authorize }) })),
      ],
      ...(metrics === undefined ? {} : { metrics: metrics.metrics }),
      ...(owners === undefined ? {} : { onDrive: owners.driven }),
    });
  } catch (error) {
    stopMetrics?.();
    stopLogging();
    await engine.close();
    await served.release();
    await profiles.idle();
    await agents.close();
    await archival?.close();
    throw error;
  }
  log.log(`runestream: listening on ${server.url} and ${server.httpUrl} (log: ${served.description})`);
  logger.info({ url: server.url, httpUrl: server.httpUrl, log: served.description }, 'listening');
  log.log(`runestream: the inspector is at ${server.httpUrl}/`);
  if (metrics !== undefined) log.log(`runestream: metrics at ${server.httpUrl}/metrics; snapshots written to ${metrics.file}`);
  if (identities !== undefined) log.log(`runestream: ${Object.keys(command.tokens!).length} tokens from --tokens-file, each holder limited to what it may`);
  else if (token === undefined) log.log(`runestream: no token set (--token-file, RUNESTREAM_TOKEN or --token), so it listens on ${host} only`);
  log.log(`runestream: ${agents.defaultRole} agent on ${agents.description}: spawn "conv/<c>/agent/<a>/turn" as "turn-engine", then dispatch start_turn`);
  log.log(
    `runestream: AG-UI at ${Object.keys(agents.profiles)
      .map((role) => `${server.httpUrl}/agents/${role}/ag-ui`)
      .join(', ')}`,
  );
  if (archival !== undefined) log.log('runestream: archival on: POST /archive/:target and /restore/:target (runestream archive|restore <stream>)');
  if (clis !== undefined) {
    const names = Object.entries(command.config.clis ?? {}).map(([name, cli]) => `${name} (${cli.protocol})`);
    log.log(`runestream: agent CLIs ${names.join(', ')}: spawn any stream as "agent-manager-session" with input {cli}, then dispatch start_session`);
    const containment = await cliContainment();
    if (containment.kind === 'pid_namespace') log.log('runestream: each agent CLI runs in a PID namespace of its own: whatever it starts ends with it');
    else {
      const msg = `agent CLIs run in their process group only (${containment.reason}): a process a CLI starts in a group or session of its own may outlive it`;
      log.log(`runestream: ${msg}`);
      logger.warn({ reason: containment.reason }, msg);
    }
  }
  return {
    engine,
    server,
    stop: async () => {
      await server.close();
      stopMetrics?.();
      await engine.close();
      stopLogging();
      await served.release();
      await profiles.idle(); // the registered definitions' MCP servers
      await agents.close();
      await archival?.close();
    },
  };
}
