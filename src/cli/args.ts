import { readFileSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { originOf } from '../server/access.js';
import { LOG_LEVELS, parseServerConfig, MAX_CONFIG_BYTES, ServerConfigError, type LogLevel, type ServerConfig } from '../server/config/server-config.js';
import { COMMAND_OPTIONS, COMMANDS, type CommandName } from './help.js';
import { TokensFile } from '../server/token-identities.js';
import { configFromModelSpecs } from './model-specs.js';

/** What the command line asks for. */
export type Command =
  | {
      command: 'help';
      /** `runestream <topic> --help`: that command's help; none, every command's. */
      topic?: CommandName;
    }
  | {
      /** Asks the running server to archive a stream (a sealed conversation and what is under it), or to restore it. */
      command: 'archive' | 'restore';
      target: string;
      /** The running server's HTTP URL. */
      url: string;
      token: string | undefined;
    }
  | {
      command: 'serve';
      port: number;
      /** The SQLite file of the log (`--db`); unused with `store`. */
      db: string;
      /**
       * The PostgreSQL log several processes share (`--store` or `RUNESTREAM_STORE`, a
       * `postgres://` URL), with how long a dead process's effects wait before a survivor takes
       * them (`--lease-ms`); none: the SQLite file `db`.
       */
      store?: { readonly url: string; readonly leaseMs?: number };
      token: string | undefined;
      /** The `--tokens-file` identities, each token to its holder's id and what it may do; with it, `token` is undefined. */
      tokens?: TokensFile;
      host: string;
      /** The `--allow-origin` origins, normalized. */
      allowedOrigins: string[];
      /** The agents and models to serve: the `--config` file's, or made from the model flags and environment. */
      config: ServerConfig;
      /** Where `config` came from: the file's path, `--model`, `RUNESTREAM_MODELS`, ... */
      configSource: string;
      /** `--log-level`, which outranks the configuration's `log.level`; none: that, else `info`. */
      logLevel?: LogLevel;
    };

/** A command line that cannot be run: printed with a pointer to `--help`, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

const OPTIONS = {
  port: { type: 'string' },
  db: { type: 'string' },
  store: { type: 'string' },
  'lease-ms': { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  'tokens-file': { type: 'string' },
  host: { type: 'string' },
  'allow-origin': { type: 'string', multiple: true },
  config: { type: 'string' },
  model: { type: 'string', multiple: true },
  url: { type: 'string' },
  'log-level': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * Parses `runestream`'s arguments (after the node and script paths). Throws {@link UsageError},
 * or a `ServerConfigError` for a configuration that cannot be used (both exit 2).
 */
export function parseCommand(args: readonly string[], env: NodeJS.ProcessEnv): Command {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown option ${/'[^']*'/.exec(message)?.[0] ?? message}`);
    throw new UsageError(message);
  }
  const { values, positionals } = parsed;
  const [command, ...extra] = positionals;
  const known = COMMANDS.find((name) => name === command);
  if (command !== undefined && known === undefined) throw new UsageError(`unknown command "${command}": the commands are "serve", "archive" and "restore"`);
  if (values.help === true) return known === undefined ? { command: 'help' } : { command: 'help', topic: known };
  if (known === undefined) throw new UsageError('missing command: the commands are "serve", "archive" and "restore"');
  if (known === 'archive' || known === 'restore') return archivalCommand(known, extra, values, env);
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  if (values.url !== undefined) throw new UsageError('--url is for archive and restore; serve takes --host and --port');

  const port = values.port === undefined ? 7070 : Number(values.port);
  if (!/^\d+$/.test(values.port ?? '7070') || port > 65_535) throw new UsageError(`--port must be an integer from 0 to 65535, got "${values.port}"`);
  if (values.token !== undefined && values['token-file'] !== undefined) throw new UsageError('--token and --token-file are both set: use one');
  const tokensFile = values['tokens-file'];
  if (tokensFile !== undefined && (values.token !== undefined || values['token-file'] !== undefined))
    throw new UsageError(`--tokens-file and --${values.token === undefined ? 'token-file' : 'token'} are both set: use one`);
  const tokenFile = values['token-file'] === undefined ? undefined : tokenFromFile(values['token-file']);
  // With a tokens file, RUNESTREAM_TOKEN is not a credential.
  const token = tokensFile !== undefined ? undefined : (values.token ?? tokenFile ?? (env.RUNESTREAM_TOKEN || undefined));
  const allowedOrigins = (values['allow-origin'] ?? []).map(
    (origin) => (origin === '*' ? origin : originOf(origin)) ?? usage(`--allow-origin must be an origin like http://localhost:5173 (or "*"), got "${origin}"`),
  );
  const store = storeOf(values, env);
  return {
    command: 'serve',
    port,
    db: values.db ?? 'runestream.db',
    ...(store === undefined ? {} : { store }),
    token,
    ...(tokensFile === undefined ? {} : { tokens: tokensOf(tokensFile) }),
    host: values.host ?? '127.0.0.1',
    allowedOrigins,
    ...configOf(values, env),
    ...(values['log-level'] === undefined ? {} : { logLevel: logLevelOf(values['log-level']) }),
  };
}

/** The PostgreSQL log `--store` or `RUNESTREAM_STORE` names, with `--lease-ms`; none: the SQLite file. */
function storeOf(values: { db?: string; store?: string; 'lease-ms'?: string }, env: NodeJS.ProcessEnv): { url: string; leaseMs?: number } | undefined {
  const url = values.store ?? (env.RUNESTREAM_STORE || undefined);
  const leaseText = values['lease-ms'];
  if (url === undefined) {
    if (leaseText !== undefined) throw new UsageError('--lease-ms is for a PostgreSQL log: give --store postgres://... too');
    return undefined;
  }
  const from = values.store === undefined ? 'RUNESTREAM_STORE' : '--store';
  if (values.db !== undefined) throw new UsageError(`--db and ${from} are both given: the log is either a SQLite file or a PostgreSQL database`);
  if (!/^postgres(ql)?:\/\/\S+$/.test(url))
    throw new UsageError(`${from} must be a PostgreSQL URL like postgres://user@127.0.0.1:5432/runestream (for a SQLite file use --db), got "${url}"`);
  if (leaseText === undefined) return { url };
  const leaseMs = Number(leaseText);
  if (!/^\d+$/.test(leaseText) || leaseMs < 100 || leaseMs > 600_000) throw new UsageError(`--lease-ms must be an integer from 100 to 600000 (ms), got "${leaseText}"`);
  return { url, leaseMs };
}

/** `archive <stream>` / `restore <stream>`: the target, the server's URL and the token (as serve takes it). */
function archivalCommand(
  command: 'archive' | 'restore',
  positionals: readonly string[],
  values: { url?: string; token?: string; 'token-file'?: string } & Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): Command {
  const [target, ...extra] = positionals;
  if (target === undefined || target === '') throw new UsageError(`${command} needs the stream to ${command}, e.g. runestream ${command} conv/c1`);
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const serveOnly = Object.keys(values).find((name) => values[name] !== undefined && !COMMAND_OPTIONS[command].includes(name));
  if (serveOnly !== undefined) throw new UsageError(`--${serveOnly} is for serve; ${command} takes --url and the token`);
  const url = values.url ?? 'http://127.0.0.1:7070';
  if (!/^https?:\/\/[^/]+\/?$/.test(url)) throw new UsageError(`--url must be the server's HTTP URL, like http://127.0.0.1:7070, got "${url}"`);
  if (values.token !== undefined && values['token-file'] !== undefined) throw new UsageError('--token and --token-file are both set: use one');
  const token = values.token ?? (values['token-file'] === undefined ? undefined : tokenFromFile(values['token-file'])) ?? (env.RUNESTREAM_TOKEN || undefined);
  return { command, target, url: url.replace(/\/$/, ''), token };
}

/** The configuration the flags and environment name, first to last: see `USAGE`. */
function configOf(values: { config?: string; model?: string[] }, env: NodeJS.ProcessEnv): { config: ServerConfig; configSource: string } {
  const file = values.config ?? (env.RUNESTREAM_CONFIG || undefined);
  if (file !== undefined) {
    if (values.model !== undefined) throw new UsageError('--model and a configuration file are both given: name the models in the file');
    return { config: parseServerConfig(configText(file), file), configSource: file };
  }
  if (values.model !== undefined) return { config: configFromModelSpecs(values.model, '--model', env), configSource: '--model' };
  const listed = env.RUNESTREAM_MODELS?.split(',').filter((spec) => spec.trim() !== '');
  if (listed !== undefined && listed.length > 0) return { config: configFromModelSpecs(listed, 'RUNESTREAM_MODELS', env), configSource: 'RUNESTREAM_MODELS' };
  const modelId = envModelOf(env);
  return {
    config: configFromModelSpecs(modelId === undefined ? [] : [modelId], 'RUNESTREAM_MODEL', env),
    configSource: modelId === undefined ? 'the offline demo' : 'RUNESTREAM_MODEL',
  };
}

/** A configuration file's text; an unreadable or oversized file is a `config_invalid` error naming it. */
function configText(path: string): string {
  let size: number;
  try {
    size = statSync(path).size;
  } catch (error) {
    throw new ServerConfigError(path, [{ path: '', message: `cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}` }]);
  }
  if (size > MAX_CONFIG_BYTES) throw new ServerConfigError(path, [{ path: '', message: `the file is ${size} bytes; at most ${MAX_CONFIG_BYTES} are read` }]);
  return readFileSync(path, 'utf8');
}

/** A `--log-level` value, checked. */
function logLevelOf(text: string): LogLevel {
  const level = LOG_LEVELS.find((name) => name === text);
  return level ?? usage(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got "${text}"`);
}

const usage = (message: string): never => {
  throw new UsageError(message);
};

/** The identities of a `--tokens-file` (JSON, at most 1 MiB); an unreadable or invalid file is a usage error naming the token's holder and field. */
function tokensOf(path: string): TokensFile {
  let json: unknown;
  try {
    if (statSync(path).size > MAX_CONFIG_BYTES) throw new UsageError(`--tokens-file "${path}" is larger than ${MAX_CONFIG_BYTES} bytes`);
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`--tokens-file "${path}" cannot be read as JSON: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const parsed = TokensFile.safeParse(json);
  if (parsed.success) return parsed.data;
  // A token is a secret: an issue is named by its holder's position, never by the token.
  const issue = parsed.error.issues[0]!;
  const [token, ...rest] = issue.path;
  const at = token === undefined ? '' : `the ${Object.keys(json as object).indexOf(String(token)) + 1}. token${rest.length === 0 ? '' : `'s ${rest.join('.')}`}: `;
  throw new UsageError(
    `--tokens-file "${path}": ${at}${issue.message} (expected {"<token of 16+ characters>": {"id": "alice", "may": ["see", "drive", "approve"], "streams"?: ["user/alice/*"]}})`,
  );
}

/** The token in `path`, trimmed; an unreadable or empty file is a usage error. */
function tokenFromFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--token-file "${path}" cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const token = text.trim();
  if (token === '') throw new UsageError(`--token-file "${path}" is empty: put the token in it`);
  return token;
}

/** The model id `RUNESTREAM_MODEL` names at `OPENAI_BASE_URL`, if it names one; half a configuration is an error. */
function envModelOf(env: NodeJS.ProcessEnv): string | undefined {
  const baseURL = env.OPENAI_BASE_URL || undefined;
  const modelId = env.RUNESTREAM_MODEL || undefined;
  if (baseURL === undefined && modelId === undefined) return undefined;
  if (baseURL === undefined) throw new UsageError('RUNESTREAM_MODEL is set but OPENAI_BASE_URL is not: set both to use an OpenAI-compatible model');
  if (modelId === undefined) throw new UsageError('OPENAI_BASE_URL is set but RUNESTREAM_MODEL is not: set both to use an OpenAI-compatible model');
  return modelId;
}
