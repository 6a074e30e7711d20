import { StoreConflictError, StoreError, StoreFencedError } from '../store.js';
import { SQLSTATE_CONFLICT, SQLSTATE_FENCED } from './schema.js';

/** What `pg` rejects with: a server error has a SQLSTATE `code`, a socket error a Node one. */
interface PgLikeError extends Error {
  readonly code?: string;
  readonly detail?: string;
}

/** Node's codes of a connection that failed or was lost. */
const CONNECTION_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * Whether the connection, not the statement, failed: a socket error, a connection ended under a
 * query (`pg` says "Connection terminated"), SQLSTATE class 08, or the server shutting down (57P0x).
 */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { code } = error as PgLikeError;
  if (code !== undefined && (CONNECTION_CODES.has(code) || code.startsWith('08') || /^57P0[1-3]$/.test(code))) return true;
  return /Connection terminated|Client has encountered a connection error|Connection ended|timeout exceeded when trying to connect/i.test(error.message);
}

/**
 * What `pg` threw, as a {@link StoreError} with a stable code and the `pg` error as its `cause`:
 * the append function's refusals as {@link StoreConflictError} and {@link StoreFencedError}, a
 * lost or refused connection as `unavailable`, a value jsonb cannot hold as `invalid_rune`,
 * anything else the server refused as `io_error`.
 */
export function storeErrorOf(error: unknown, doing: string): StoreError {
  if (error instanceof StoreError) return error;
  const pgError = error as PgLikeError;
  if (pgError?.code === SQLSTATE_CONFLICT) {
    const { stream, expected, got } = JSON.parse(pgError.detail!) as { stream: string; expected: number; got: number };
    return new StoreConflictError(stream, expected, got);
  }
  if (pgError?.code === SQLSTATE_FENCED) {
    const { lease, epoch, newest } = JSON.parse(pgError.detail!) as { lease: string; epoch: number; newest: number };
    return new StoreFencedError({ lease, epoch }, newest);
  }
  if (pgError?.code === '22P05' || pgError?.code === '22P02') {
    return new StoreError(
      'invalid_rune',
      `postgresStore: PostgreSQL cannot hold a value of ${doing} (${pgError.code}: ${pgError.message}): jsonb takes no NUL character (\\u0000) and no lone surrogate in a string; nothing of it was written`,
      { cause: error },
    );
  }
  const said = error instanceof Error ? `${pgError.code === undefined ? '' : `${pgError.code}: `}${error.message}` : String(error);
  if (isConnectionError(error)) {
    return new StoreError(
      'unavailable',
      `postgresStore: ${doing} failed, the connection to PostgreSQL was lost or refused (${said}); a failed write may have been committed just before, or not at all: read the stream's head to know`,
      { cause: error },
    );
  }
  return new StoreError('io_error', `postgresStore: PostgreSQL failed ${doing} (${said})`, { cause: error });
}
