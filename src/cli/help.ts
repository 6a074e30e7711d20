// What `runestream --help` and `runestream <command> --help` print. Every option of a command is
// listed with its default; the parser (args.ts) accepts exactly the options listed here.

/** The commands of `runestream`. */
export const COMMANDS = ['serve', 'archive', 'restore'] as const;
export type CommandName = (typeof COMMANDS)[number];

const TOKEN_OPTIONS = `  --token-file <file>      file holding the token every client must present
                           (Authorization: Bearer <t> or ?token=<t>), trimmed; the token may
                           also come from the RUNESTREAM_TOKEN environment variable
                           (default: none)
  --token <t>              the token itself (other users of this machine see it in ps:
                           prefer --token-file or RUNESTREAM_TOKEN) (default: none)`;

const SERVE_HELP = `Usage: runestream serve [options]

Serves a runestream engine over WebSocket and HTTP (SSE), its runes kept in a SQLite file
or, shared by several serve processes, in a PostgreSQL database.

Options:
  --port <n>               TCP port to listen on; 0 picks a free one (default 7070)
  --db <file>              SQLite file of the log, created if missing (default runestream.db)
  --store <url>            a PostgreSQL log instead (postgres://user@host:5432/db), which
                           several serve processes share: any of them serves every stream,
                           each stream's effects run in one of them at a time; also
                           RUNESTREAM_STORE (see README, "Several processes") (default: none)
  --lease-ms <n>           with --store: how long a process that died keeps its streams'
                           effects before a survivor takes them over (default 10000)
${TOKEN_OPTIONS}
  --tokens-file <file>     several identities instead of one token: JSON, each token (16+
                           characters) to its holder, {"<token>": {"id": "alice", "may": ["see",
                           "drive", "approve"], "streams": ["user/alice/*"]}}; a holder may only
                           what "may" lists, on the streams "streams" matches (default: all);
                           an approval records its id (default: none; one token may all)
  --host <h>               interface to listen on (default 127.0.0.1); without a token only
                           a loopback address is allowed
  --allow-origin <origin>  a web origin allowed to connect besides the server's own, e.g.
                           http://localhost:5173; repeatable; "*" lets every web page the
                           user opens drive the server (dangerous) (default: none)
  --config <file>          the server configuration (JSON, at most 1 MiB): models, provider
                           chains, agents by role, prices, conversation limits (see README,
                           "Configuration"); also RUNESTREAM_CONFIG (default: none)
  --model <spec>           without a configuration file: a model of the demo agent's chain,
                           tried in order, repeatable; a spec is "demo" (offline),
                           <model>@<baseURL> (an OpenAI-compatible server, e.g.
                           llama3.2@http://localhost:11434/v1) or <model> (at OPENAI_BASE_URL);
                           also RUNESTREAM_MODELS, comma-separated (default: the offline demo model)
  --log-level <level>      the least severe log line written: trace, debug, info, warn, error,
                           fatal or silent; also the configuration's log.level (default info)
  -h, --help               show this help

Logs: JSON lines on stdout (pretty when stdout is a terminal): listening, connections opened
and closed (debug), model call failures, tool failures and failed turns (warn), errors.

Endpoints: ws://host:port (the protocol), GET /streams/:stream/events (SSE), GET /healthz.

An agent is served too (the configuration's default role, else "demo"): spawn
"conv/<c>/agent/<a>/turn" as machine "turn-engine", then dispatch {type: "start_turn", input}
to it. Its models come from, first to last: --config, RUNESTREAM_CONFIG, --model,
RUNESTREAM_MODELS, RUNESTREAM_MODEL (at OPENAI_BASE_URL); else the offline demo model.
OPENAI_API_KEY, if set, is the key of every model the flags name; a configuration file names
each model's key variable (apiKeyEnv). A model that fails (an error, an HTTP 429 whose
Retry-After opens its breaker, an empty answer) falls over to the next in its chain.
A configuration that cannot be used exits 2, naming the file and the field.
SIGINT or SIGTERM closes the server, flushes the log and exits 0.`;

const ARCHIVAL_HELP = (command: 'archive' | 'restore'): string => `Usage: runestream ${command} <stream> [--url <url>] [--token-file <file> | --token <t>]

${
  command === 'archive'
    ? `Asks the running server to archive a stream: a sealed conversation (conv/<c>, closed) and
every stream under it. The server writes and verifies their archives in cold storage, then
prunes them from the log.`
    : `Asks the running server to restore an archived stream: its runes go back into the log.`
} The server is the one process writing the log, and its configuration has an "archival" key.
Prints the server's JSON answer; a refusal (e.g. not_sealed, checksum_mismatch) exits 1.

Options:
  --url <url>              the running server's HTTP URL (default http://127.0.0.1:7070)
${TOKEN_OPTIONS}
  -h, --help               show this help`;

/** The options each command takes (long names, as parseArgs reads them). */
export const COMMAND_OPTIONS: Readonly<Record<CommandName, readonly string[]>> = {
  serve: ['port', 'db', 'store', 'lease-ms', 'token', 'token-file', 'tokens-file', 'host', 'allow-origin', 'config', 'model', 'log-level', 'help'],
  archive: ['url', 'token', 'token-file', 'help'],
  restore: ['url', 'token', 'token-file', 'help'],
};

/** What `runestream --help` prints: the commands, then each command's help. */
export const USAGE = `Usage: runestream <command> [options]

Commands:
  serve             serve the engine over WebSocket and HTTP (SSE)
  archive <stream>  ask a running server to move a sealed conversation to cold storage
  restore <stream>  ask a running server to bring an archived stream back

Run "runestream <command> --help" for one command's options.

${SERVE_HELP}

${ARCHIVAL_HELP('archive')}

${ARCHIVAL_HELP('restore')}`;

/** The help a bad command line points at: that of the command it names, else every command's. */
export function helpCommandFor(args: readonly string[]): string {
  const named = COMMANDS.find((command) => args.includes(command));
  return named === undefined ? 'runestream --help' : `runestream ${named} --help`;
}

/** The help of one command, or of all of them. */
export function helpOf(command: CommandName | undefined): string {
  if (command === undefined) return USAGE;
  return command === 'serve' ? SERVE_HELP : ARCHIVAL_HELP(command);
}
