import { inspect } from 'node:util';
import { chatActorLifecycle } from '../effects/chat-actor-lifecycle.js';
import { toolCallRecovery } from '../effects/tool-call-recovery.js';
import { createServer, type RunestreamServer } from '../server/server.js';
import { createEngine, type Engine } from '../streams/engine.js';
import { sqliteStore } from '../streams/sqlite-store.js';
import type { Command } from './args.js';

/** A running `runestream serve`. */
export interface Serving {
  readonly engine: Engine;
  readonly server: RunestreamServer;
  /** Closes the server, then the engine (which flushes the log). */
  stop(): Promise<void>;
}

/**
 * `runestream serve`: a SQLite log, an engine with the chat actor's lifecycle and the tool-call
 * recovery epics, and a server in front. Prints where it listens (and, with no token, that it
 * listens on loopback only). Engine errors nobody waits for are printed to `log.error`.
 */
export async function serve(command: Extract<Command, { command: 'serve' }>, log: Pick<Console, 'log' | 'error'>): Promise<Serving> {
  const { port, db, token, host } = command;
  const engine = createEngine({ store: sqliteStore(db), epics: [chatActorLifecycle(), toolCallRecovery()] });
  engine.errors$.subscribe((error) => log.error(`runestream: ${error.type}: ${inspect(error, { depth: 4, breakLength: Infinity })}`));
  let server: RunestreamServer;
  try {
    server = await createServer({ engine, port, host, ...(token === undefined ? {} : { token }) });
  } catch (error) {
    await engine.close();
    throw error;
  }
  log.log(`runestream: listening on ${server.url} and ${server.httpUrl} (log: ${db})`);
  if (token === undefined) log.log(`runestream: no token set (--token or RUNESTREAM_TOKEN), so it listens on ${host} only`);
  return {
    engine,
    server,
    stop: async () => {
      await server.close();
      await engine.close();
    },
  };
}
