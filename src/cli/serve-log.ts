import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { inspect } from 'node:util';
import { pino, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';
import type { Observable } from 'rxjs';
import type { Rune } from '../reducers/rune.js';
import type { LogLevel } from '../server/config/server-config.js';
import { SERVER_CHANNELS, type ConnectionReport } from '../server/diagnostics.js';
import { ENGINE_CHANNELS, type StoreAvailabilityReport } from '../streams/diagnostics.js';
import type { Engine } from '../streams/engine.js';
import { repeatLimitedLog, type LogRepeatOptions } from './log-repeats.js';

/**
 * The log of `runestream serve`: JSON lines on stdout, or pino-pretty's lines when stdout is a
 * terminal. Written synchronously, so its lines and the start-up lines printed with console.log
 * come out in the order they happened.
 */
export function serveLogger(level: LogLevel, pretty = process.stdout.isTTY === true): Logger {
  const destination = pretty ? pinoPretty({ destination: 1, sync: true, colorize: true }) : pino.destination({ dest: 1, sync: true });
  return pino({ name: 'runestream', level }, destination);
}

/** One log line a rune calls for: its level, message and fields. */
export interface RuneLogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly msg: string;
  readonly fields: Record<string, unknown>;
}

/**
 * What a rune says that an operator should hear of, or `undefined`: a failed model call (a
 * provider's breaker counting a failure, or opening), a failed or timed-out tool call, a failed
 * turn. Read from the log's runes, so it covers every agent whatever ran it.
 */
export function logLineOf(rune: Rune): RuneLogLine | undefined {
  const payload = (rune.payload ?? {}) as Record<string, unknown>;
  const event = rune.event as Record<string, unknown>;
  if (rune.machine === 'circuit-breaker' && rune.kind === 'failure') {
    const provider = rune.stream.replace(/^provider\//, '');
    return { level: 'warn', msg: `model call failed: ${provider}: ${String(event.error)}`, fields: { stream: rune.stream, provider, error: event.error } };
  }
  if (rune.machine === 'circuit-breaker' && rune.to === 'OPEN' && rune.from !== 'OPEN') {
    const provider = rune.stream.replace(/^provider\//, '');
    return { level: 'warn', msg: `model provider ${provider} is skipped for now (its breaker opened)`, fields: { stream: rune.stream, provider } };
  }
  if (rune.kind === 'turn.error') {
    return { level: 'error', msg: `turn failed: ${String(payload.message)}`, fields: { stream: rune.stream, errorType: payload.errorType, error: payload.message } };
  }
  if (rune.kind === 'tool.result' && payload.status !== 'success' && payload.status !== 'cancelled') {
    return { level: 'warn', msg: `tool call ${String(payload.callId)} ended ${String(payload.status)}`, fields: { stream: rune.stream, ...payload } };
  }
  return undefined;
}

/** How much of an engine error is described: its strings cut at 1,000 characters, its arrays at 20 elements. */
const ERROR_INSPECT = { depth: 4, breakLength: Infinity, maxStringLength: 1000, maxArrayLength: 20 } as const;

/**
 * Logs, until the returned function is called: the lines {@link logLineOf} finds in the engine's
 * runes, the engine's errors nobody waits for (damaged data a read found: its code, stream and where),
 * the store's database going unreachable (warn) and back (info), once per outage, WebSocket
 * connections opened and closed (debug), and, with shard leases, each change of the shards this
 * process owns. Lines of one kind from one source are rate-limited (`repeats`, see
 * {@link repeatLimitedLog}: by default at most 10 in 10 s, then one line saying how many more
 * came); an error's description is bounded.
 */
export function logServing(
  engine: Engine,
  logger: Logger,
  shards?: { readonly owner: string; readonly changes$: Observable<readonly number[]> },
  repeats: LogRepeatOptions = {},
): () => void {
  const log = repeatLimitedLog(logger, repeats);
  const runes = engine.runes$().subscribe((rune) => {
    const line = logLineOf(rune);
    // A breaker's lines are each provider's own; the others are of their machine and kind.
    if (line !== undefined) log.write(line.level, `${rune.machine} ${rune.kind}${rune.machine === 'circuit-breaker' ? ` ${rune.stream}` : ''}`, line.fields, line.msg);
  });
  const errors = engine.errors$.subscribe((error) => {
    const key = 'epic' in error ? `${error.type} ${error.epic}` : error.type;
    // Damaged data (an archive's segment, a stored rune off its hash chain): its code, the stream and where, on one line.
    if (error.type === 'archive_damaged' || error.type === 'stream_corrupt')
      return log.write('error', `${key} ${error.stream}`, { type: error.type, stream: error.stream, code: error.error.code }, error.error.message);
    log.write('error', key, { type: error.type }, `${error.type}: ${inspect(error, ERROR_INSPECT)}`);
  });
  const owned = shards?.changes$.subscribe((shardIds) =>
    log.write('info', 'shards', { owner: shards.owner, shards: shardIds }, `shards owned by ${shards.owner}: ${shardIds.length}`),
  );
  const onConnection = (message: unknown): void => {
    const { connection, event, identity } = message as ConnectionReport;
    log.write('debug', `connection ${event}`, { connection, identity }, `connection ${connection} ${event}`);
  };
  subscribe(SERVER_CHANNELS.connection, onConnection);
  // Once per outage of the store's database: a warning when it goes, an info line when it is back.
  const onAvailability = (message: unknown): void => {
    const { available, store, error } = message as StoreAvailabilityReport;
    if (available) logger.info({ store }, `store ${store} is reachable again`);
    else logger.warn({ store, error }, `store ${store} is unreachable: ${error}`);
  };
  subscribe(ENGINE_CHANNELS.availability, onAvailability);
  return () => {
    unsubscribe(ENGINE_CHANNELS.availability, onAvailability);
    runes.unsubscribe();
    errors.unsubscribe();
    owned?.unsubscribe();
    unsubscribe(SERVER_CHANNELS.connection, onConnection);
    log.close();
  };
}
