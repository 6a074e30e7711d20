import { Client, type ClientConfig, type Pool } from 'pg';
import { interval, type SchedulerLike, type Subscription } from 'rxjs';
import { exponentialDelay } from '../../reducers/backoff.js';
import type { TailListener } from '../store.js';
import { RUNE_COLUMNS, runeFromRow, type RuneRow } from './rune-rows.js';

/** The LISTEN connection's reconnect delays: doubling from this, capped below. */
const RECONNECT_BASE_MS = 100;
const RECONNECT_MAX_MS = 10_000;
/**
 * A pass held back by an open transaction looks again this much later: the transaction that
 * holds it may send no notification (a lease round, another database's work), and the poll is
 * far off.
 */
const HELD_RETRY_MS = 10;

/** A promise with its resolve function (Node 20 has no `Promise.withResolvers`). */
function newTick(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** What a tail reads from and listens on. */
export interface PostgresTailOptions {
  readonly pool: Pool;
  /** How the LISTEN connection connects (the pool's own settings). */
  readonly connection: ClientConfig;
  /** The quoted schema. */
  readonly schema: string;
  readonly channel: string;
  readonly pollMs: number;
  readonly scheduler: SchedulerLike;
  /** Runes per catch-up query. */
  readonly pageSize: number;
}

/** Listeners that share one position in the log; `position` undefined until the log's end is read. */
interface Cursor {
  position: number | undefined;
  listeners: readonly TailListener[];
  /** The catch-up running, if any; `again` asks it for one more pass (a trigger came meanwhile). */
  running: Promise<void> | undefined;
  again: boolean;
}

/** A catch-up row: a rune, its position, its writer, and whether it may be delivered yet. */
interface TailRow extends RuneRow {
  gpos: number;
  writer: string | null;
  restored: boolean;
  safe: boolean;
}

/**
 * The `tail` of a PostgreSQL store: every rune any process commits, in position order, each once.
 *
 * 1. A dedicated connection LISTENs on the channel every append NOTIFYs with a pointer; a
 *    notification, each (re)connect and a poll every `pollMs` run the catch-up query. Notifications
 *    are not stored: the catch-up after a reconnect finds what was committed meanwhile.
 * 2. The catch-up reads runes after the cursor's position and delivers them in order while each is
 *    safe: its `txid` is below `pg_snapshot_xmin`, so no open transaction can still commit a lower
 *    position (appends draw positions in transaction id order: see schema.ts). It stops at the
 *    first unsafe one, which the next pass reads again: triggered by the next notification, or
 *    10 ms later, since the transaction holding it back may send none.
 * 3. Listeners without a start position share a cursor that starts at the log's end, read when the
 *    first of them subscribes; one with `afterPosition` has its own.
 * 4. A lost LISTEN connection is reconnected with exponential backoff on the scheduler.
 */
export class PostgresTail {
  readonly #options: PostgresTailOptions;
  readonly #cursors = new Set<Cursor>();
  /** The cursor of listeners that start at the log's end. */
  #shared: Cursor | undefined;
  #client: Client | undefined;
  #attempt = 0;
  #retry: Subscription | undefined;
  #poll: Subscription | undefined;
  /** The pass again after {@link HELD_RETRY_MS}, while a transaction holds a cursor back. */
  #heldRetry: Subscription | undefined;
  #closed = false;
  /** Resolved at the next trigger: what an append waiting for its runes' delivery waits on. */
  #tick = newTick();

  constructor(options: PostgresTailOptions) {
    this.#options = options;
  }

  /** Adds a listener; returns the function that removes it. */
  add(listener: TailListener, afterPosition?: number): () => void {
    let cursor: Cursor;
    if (afterPosition === undefined && this.#shared !== undefined) cursor = this.#shared;
    else {
      cursor = { position: afterPosition, listeners: [], running: undefined, again: false };
      if (afterPosition === undefined) this.#shared = cursor;
      this.#cursors.add(cursor);
      if (this.#cursors.size === 1) this.#start();
      void this.#pump(cursor);
    }
    cursor.listeners = [...cursor.listeners, listener];
    return () => {
      cursor.listeners = cursor.listeners.filter((l) => l !== listener);
      if (cursor.listeners.length > 0 || !this.#cursors.delete(cursor)) return;
      if (cursor === this.#shared) this.#shared = undefined;
      if (this.#cursors.size === 0) void this.#stop();
    };
  }

  /** Whether any listener is subscribed. */
  get active(): boolean {
    return this.#cursors.size > 0;
  }

  /** Waits until every cursor knows its start: an append made after `tail()` returned is heard. */
  async started(): Promise<void> {
    await Promise.all([...this.#cursors].filter((c) => c.position === undefined).map((c) => this.#pump(c)));
  }

  /**
   * Runs a catch-up pass now and waits for it; resolves to the lowest position the cursors have
   * delivered through (`undefined` without listeners).
   */
  async catchUp(): Promise<number | undefined> {
    await Promise.all([...this.#cursors].map((c) => this.#pump(c)));
    const positions = [...this.#cursors].map((c) => c.position ?? 0);
    return positions.length === 0 ? undefined : Math.min(...positions);
  }

  /**
   * Waits until every cursor has delivered through `position` (an append's last rune), passing
   * again at each trigger: a transaction still open below it holds it back. Resolves at close.
   */
  async delivered(position: number): Promise<void> {
    for (;;) {
      const tick = this.#tick.promise;
      const behind = [...this.#cursors].filter((c) => c.position === undefined || c.position < position);
      if (behind.length === 0 || this.#closed) return;
      await Promise.all(behind.map((c) => this.#pump(c)));
      if (behind.every((c) => c.position !== undefined && c.position >= position)) return;
      await tick;
    }
  }

  /** Stops every listener and the LISTEN connection. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#cursors.clear();
    this.#shared = undefined;
    await this.#stop();
  }

  #start(): void {
    this.#poll = interval(this.#options.pollMs, this.#options.scheduler).subscribe(() => this.#trigger());
    this.#connect();
  }

  async #stop(): Promise<void> {
    this.#poll?.unsubscribe();
    this.#poll = undefined;
    this.#retry?.unsubscribe();
    this.#retry = undefined;
    this.#heldRetry?.unsubscribe();
    this.#heldRetry = undefined;
    this.#tock();
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }

  /** Tells every cursor to catch up, and the appends waiting for delivery to look again. */
  #trigger(): void {
    for (const cursor of this.#cursors) void this.#pump(cursor);
    this.#tock();
  }

  /** Wakes the appends waiting for the next trigger. */
  #tock(): void {
    const tick = this.#tick;
    this.#tick = newTick();
    tick.resolve();
  }

  #connect(): void {
    const client = new Client(this.#options.connection);
    this.#client = client;
    client.on('notification', () => this.#trigger());
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client
      .connect()
      .then(() => client.query(`LISTEN "${this.#options.channel}"`))
      .then(
        () => {
          if (this.#client !== client) return;
          this.#attempt = 0;
          this.#trigger(); // what was committed while no one listened
        },
        () => this.#lost(client),
      );
  }

  /** The LISTEN connection failed or ended: a new one after a backoff, unless the tail stopped. */
  #lost(client: Client): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    client.end().catch(() => {});
    if (this.#cursors.size === 0) return;
    const delay = exponentialDelay(++this.#attempt, RECONNECT_BASE_MS, RECONNECT_MAX_MS);
    this.#retry = this.#options.scheduler.schedule(() => {
      this.#retry = undefined;
      if (this.#cursors.size > 0 && this.#client === undefined) this.#connect();
    }, delay);
  }

  /** Runs the cursor's catch-up, or asks the one running for another pass; resolves when it is done. */
  #pump(cursor: Cursor): Promise<void> {
    if (cursor.running !== undefined) {
      cursor.again = true;
      return cursor.running;
    }
    const run = async (): Promise<void> => {
      let held: boolean;
      do {
        cursor.again = false;
        held = await this.#pass(cursor);
      } while (cursor.again && this.#cursors.has(cursor));
      if (held) this.#lookAgainSoon();
    };
    cursor.running = run()
      .catch(() => {
        // The database is unreachable: the next trigger (a reconnect, the poll) tries again.
      })
      .finally(() => {
        cursor.running = undefined;
      });
    return cursor.running;
  }

  /** Triggers another pass soon, once, while a cursor is held back by an open transaction. */
  #lookAgainSoon(): void {
    if (this.#heldRetry !== undefined || this.#cursors.size === 0) return;
    this.#heldRetry = this.#options.scheduler.schedule(() => {
      this.#heldRetry = undefined;
      this.#trigger();
    }, HELD_RETRY_MS);
  }

  /** One catch-up pass; resolves to whether a transaction still open held it back. */
  async #pass(cursor: Cursor): Promise<boolean> {
    const { pool, schema, pageSize } = this.#options;
    if (cursor.position === undefined) {
      const { rows } = await pool.query<{ end: number }>(`SELECT coalesce(max(gpos), 0)::float8 AS end FROM ${schema}.rs_runes`);
      cursor.position ??= rows[0]!.end;
      return false;
    }
    for (;;) {
      const { rows }: { rows: TailRow[] } = await pool.query<TailRow>(
        `SELECT gpos::float8 AS gpos, writer, restored, txid < pg_snapshot_xmin(pg_current_snapshot()) AS safe, ${RUNE_COLUMNS}
         FROM ${schema}.rs_runes WHERE gpos > $1 ORDER BY gpos LIMIT $2`,
        [cursor.position, pageSize],
      );
      for (const row of rows) {
        if (!this.#cursors.has(cursor)) return false;
        if (!row.safe) return true;
        cursor.position = row.gpos;
        if (!row.restored) this.#deliver(cursor, row);
      }
      if (rows.length < pageSize) return false;
    }
  }

  #deliver(cursor: Cursor, row: TailRow): void {
    const rune = runeFromRow(row);
    const writer = row.writer ?? undefined;
    for (const listener of cursor.listeners) {
      try {
        listener(rune, row.gpos, writer);
      } catch (error) {
        // The rune is committed whatever a listener does: its error must not stop the others.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
