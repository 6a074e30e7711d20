import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { originOf } from '../server/access.js';
import type { DemoModelConfig } from './demo-agent.js';

/** What the command line asks for. */
export type Command =
  | { command: 'help' }
  | {
      command: 'serve';
      port: number;
      db: string;
      token: string | undefined;
      host: string;
      /** The `--allow-origin` origins, normalized. */
      allowedOrigins: string[];
      model: DemoModelConfig | undefined;
    };

/** A command line that cannot be run: printed with a pointer to `--help`, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const USAGE = `Usage: runestream serve [options]

Serves a runestream engine over WebSocket and HTTP (SSE), its runes kept in a SQLite file.

Options:
  --port <n>               TCP port to listen on; 0 picks a free one (default 7070)
  --db <file>              SQLite file of the log, created if missing (default runestream.db)
  --token-file <file>      file holding the token every client must present
                           (Authorization: Bearer <t> or ?token=<t>), trimmed; the token may
                           also come from the RUNESTREAM_TOKEN environment variable
  --token <t>              the token itself (other users of this machine see it in ps:
                           prefer --token-file or RUNESTREAM_TOKEN)
  --host <h>               interface to listen on (default 127.0.0.1); without a token only
                           a loopback address is allowed
  --allow-origin <origin>  a web origin allowed to connect besides the server's own, e.g.
                           http://localhost:5173; repeatable; "*" lets every web page the
                           user opens drive the server (dangerous)
  -h, --help               show this help

Endpoints: ws://host:port (the protocol), GET /streams/:stream/events (SSE), GET /healthz.

A demo agent is served too: spawn "conv/<c>/agent/<a>/turn" as machine "turn-engine", then dispatch
{type: "start_turn", input} to it. Offline it answers with a scripted model; with
OPENAI_BASE_URL and RUNESTREAM_MODEL set (and OPENAI_API_KEY if the server needs one) it
uses that OpenAI-compatible model (Ollama, vLLM, ...).
SIGINT or SIGTERM closes the server, flushes the log and exits 0.`;

const OPTIONS = {
  port: { type: 'string' },
  db: { type: 'string' },
  token: { type: 'string' },
  'token-file': { type: 'string' },
  host: { type: 'string' },
  'allow-origin': { type: 'string', multiple: true },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Parses `runestream`'s arguments (after the node and script paths). Throws {@link UsageError}. */
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
  if (values.help === true) return { command: 'help' };
  const [command, ...extra] = positionals;
  if (command === undefined) throw new UsageError('missing command: the only command is "serve"');
  if (command !== 'serve') throw new UsageError(`unknown command "${command}": the only command is "serve"`);
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);

  const port = values.port === undefined ? 7070 : Number(values.port);
  if (!/^\d+$/.test(values.port ?? '7070') || port > 65_535) throw new UsageError(`--port must be an integer from 0 to 65535, got "${values.port}"`);
  if (values.token !== undefined && values['token-file'] !== undefined) throw new UsageError('--token and --token-file are both set: use one');
  const tokenFile = values['token-file'] === undefined ? undefined : tokenFromFile(values['token-file']);
  const token = values.token ?? tokenFile ?? (env.RUNESTREAM_TOKEN || undefined);
  const allowedOrigins = (values['allow-origin'] ?? []).map(
    (origin) => (origin === '*' ? origin : originOf(origin)) ?? usage(`--allow-origin must be an origin like http://localhost:5173 (or "*"), got "${origin}"`),
  );
  return { command: 'serve', port, db: values.db ?? 'runestream.db', token, host: values.host ?? '127.0.0.1', allowedOrigins, model: modelConfigOf(env) };
}

const usage = (message: string): never => {
  throw new UsageError(message);
};

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

/** The OpenAI-compatible model the environment names, if it names one; half a configuration is an error. */
function modelConfigOf(env: NodeJS.ProcessEnv): DemoModelConfig | undefined {
  const baseURL = env.OPENAI_BASE_URL || undefined;
  const modelId = env.RUNESTREAM_MODEL || undefined;
  if (baseURL === undefined && modelId === undefined) return undefined;
  if (baseURL === undefined) throw new UsageError('RUNESTREAM_MODEL is set but OPENAI_BASE_URL is not: set both to use an OpenAI-compatible model');
  if (modelId === undefined) throw new UsageError('OPENAI_BASE_URL is set but RUNESTREAM_MODEL is not: set both to use an OpenAI-compatible model');
  return { baseURL, modelId, apiKey: env.OPENAI_API_KEY || undefined };
}
