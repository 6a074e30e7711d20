import { parseArgs } from 'node:util';
import type { DemoModelConfig } from './demo-agent.js';

/** What the command line asks for. */
export type Command =
  | { command: 'help' }
  | { command: 'serve'; port: number; db: string; token: string | undefined; host: string; model: DemoModelConfig | undefined };

/** A command line that cannot be run: printed with a pointer to `--help`, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const USAGE = `Usage: runestream serve [options]

Serves a runestream engine over WebSocket and HTTP (SSE), its runes kept in a SQLite file.

Options:
  --port <n>     TCP port to listen on; 0 picks a free one (default 7070)
  --db <file>    SQLite file of the log, created if missing (default runestream.db)
  --token <t>    token every client must present (Authorization: Bearer <t> or ?token=<t>);
                 also read from the RUNESTREAM_TOKEN environment variable
  --host <h>     interface to listen on (default 127.0.0.1); without a token only a
                 loopback address is allowed
  -h, --help     show this help

Endpoints: ws://host:port (the protocol), GET /streams/:stream/events (SSE), GET /healthz.

A demo agent is served too: spawn "<id>/turn" as machine "turn-engine", then dispatch
{type: "start_turn", input} to it. Offline it answers with a scripted model; with
OPENAI_BASE_URL and RUNESTREAM_MODEL set (and OPENAI_API_KEY if the server needs one) it
uses that OpenAI-compatible model (Ollama, vLLM, ...).
SIGINT or SIGTERM closes the server, flushes the log and exits 0.`;

const OPTIONS = {
  port: { type: 'string' },
  db: { type: 'string' },
  token: { type: 'string' },
  host: { type: 'string' },
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
  const token = values.token ?? (env.RUNESTREAM_TOKEN || undefined);
  return { command: 'serve', port, db: values.db ?? 'runestream.db', token, host: values.host ?? '127.0.0.1', model: modelConfigOf(env) };
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
