import { resolve } from 'node:path';
import type { AgentCliAdapter, AgentCliSpec } from '../../effects/cli/cli-adapter.js';
import type { CliSessionLimits } from '../../effects/cli/cli-session-limits.js';
import type { CliConfig, ServerConfig } from './server-config.js';

/** Options of {@link configuredClis}. */
export interface ConfiguredClisOptions {
  /**
   * The folder a relative `cwd` is resolved against: the configuration file's own, so the file
   * means the same wherever the server is started. Default `process.cwd()` (a configuration that
   * did not come from a file).
   */
  readonly configDir?: string;
}

/** The configured agent CLIs made live: what the agent-manager session epic takes. */
export interface ConfiguredClis extends CliSessionLimits {
  /** Every CLI by name, with its protocol's adapter. */
  readonly clis: Readonly<Record<string, AgentCliSpec>>;
  /** The CLI of a session that names none: `defaultCli`, else the only CLI when there is one. */
  readonly defaultCli?: string;
}

/**
 * Turns the `clis` of a checked {@link ServerConfig} into {@link AgentCliSpec}s: each CLI gets the
 * adapter of its `protocol` from `adapters`, its `cwd` resolved against `options.configDir` (an
 * absolute `cwd` stays as it is), and its `command`, `args`, `env`, `idleTimeoutMs` and
 * `killGraceMs` as configured; `cliSessions`' limits come along. No process is started.
 *
 * ## Example
 * ```ts
 * import { configuredClis, parseServerConfig } from 'runestream/server';
 * const config = parseServerConfig(
 *   JSON.stringify({
 *     models: { offline: { type: 'demo' } },
 *     agents: { assistant: { model: 'offline' } },
 *     defaultRole: 'assistant',
 *     clis: { cline: { protocol: 'ndjson', command: 'cline', env: { CLINE_NO_AUTO_UPDATE: '1' }, cwd: 'work' } },
 *   }),
 *   'runestream.json',
 * );
 * const adapter = { interactive: false, launch: () => ({ args: [] }), drive: () => { throw new Error('not run here'); } };
 * const { clis, defaultCli } = configuredClis(config, { ndjson: { ...adapter, protocol: 'ndjson' }, acp: { ...adapter, protocol: 'acp', interactive: true } }, { configDir: '/srv/runestream' });
 * console.log(defaultCli, clis.cline?.cwd, clis.cline?.adapter.protocol);
 * // Logs: cline /srv/runestream/work ndjson
 * ```
 */
export function configuredClis(
  config: Pick<ServerConfig, 'clis' | 'defaultCli' | 'cliSessions'>,
  adapters: Readonly<Record<CliConfig['protocol'], AgentCliAdapter>>,
  options: ConfiguredClisOptions = {},
): ConfiguredClis {
  const configDir = options.configDir ?? process.cwd();
  const entries = Object.entries(config.clis ?? {});
  const clis: Record<string, AgentCliSpec> = {};
  for (const [name, cli] of entries) {
    clis[name] = {
      adapter: adapters[cli.protocol],
      command: cli.command,
      args: cli.args,
      env: cli.env,
      cwd: resolve(configDir, cli.cwd),
      ...(cli.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: cli.idleTimeoutMs }),
      ...(cli.killGraceMs === undefined ? {} : { killGraceMs: cli.killGraceMs }),
    };
  }
  const defaultCli = config.defaultCli ?? (entries.length === 1 ? entries[0]![0] : undefined);
  return { clis, ...(defaultCli === undefined ? {} : { defaultCli }), ...config.cliSessions };
}
