import { StoreConflictError, StoreError, StoreFencedError, type Fence, type StoreErrorCode } from '../store.js';

/**
 * What the store's thread is asked: a call of one of the store's methods, by id. `blocking`: the
 * caller waits for the answer blocking, so it comes on the answers port (see `startThread`).
 */
export type ThreadRequest = { readonly id: number; readonly blocking?: true } & (
  | { readonly method: 'append' | 'head' | 'read' | 'readEvents' | 'latestSnapshot' | 'saveSnapshot' | 'prune' | 'restore' | 'close'; readonly args: readonly unknown[] }
  /** The next page of the listing `listing`, which `args[0]` (a query) opens when it is new. */
  | { readonly method: 'heads'; readonly listing: number; readonly args: readonly [query: unknown, page: number] }
  /** The listing `listing` is dropped (its reader stopped early). */
  | { readonly method: 'endHeads'; readonly listing: number; readonly args: readonly [] }
);

/** The thread's answer to request `id`: its value, or the error it threw. */
export type ThreadReply = { readonly id: number; readonly value?: unknown; readonly error?: WireError };

/** An error as it crosses the thread: what its receiver needs to throw the same error. */
export interface WireError {
  readonly name: string;
  readonly message: string;
  readonly code?: string;
  readonly stream?: string;
  readonly expectedSeq?: number;
  readonly gotSeq?: number;
  readonly fence?: Fence;
  readonly newestEpoch?: number;
  /** The error's cause, as far as it can be said: its name, message and code (SQLite's `SQLITE_BUSY`). */
  readonly cause?: { readonly name: string; readonly message: string; readonly code?: string };
}

/** The fields of an error the other side needs; never its stack, which names this side's frames. */
export function toWire(error: unknown): WireError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const { name, message } = error;
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? error.cause : undefined;
  const causeCode = (cause as { code?: unknown } | undefined)?.code;
  return {
    name,
    message,
    ...(typeof code === 'string' ? { code } : {}),
    ...(error instanceof StoreConflictError ? { stream: error.stream, expectedSeq: error.expectedSeq, gotSeq: error.gotSeq } : {}),
    ...(error instanceof StoreFencedError ? { fence: error.fence, newestEpoch: error.newestEpoch } : {}),
    ...(cause === undefined ? {} : { cause: { name: cause.name, message: cause.message, ...(typeof causeCode === 'string' ? { code: causeCode } : {}) } }),
  };
}

/** The error a {@link WireError} describes, of the same class as the one thrown in the thread (a store's errors, TypeError, Error). */
export function fromWire(wire: WireError): Error {
  const cause = wire.cause === undefined ? undefined : Object.assign(new Error(wire.cause.message), wire.cause);
  if (wire.name === 'StoreConflictError') return new StoreConflictError(wire.stream!, wire.expectedSeq!, wire.gotSeq!);
  if (wire.name === 'StoreFencedError') return new StoreFencedError(wire.fence!, wire.newestEpoch!);
  if (wire.name === 'StoreError') return new StoreError(wire.code as StoreErrorCode, wire.message, cause === undefined ? undefined : { cause });
  const error = wire.name === 'TypeError' ? new TypeError(wire.message) : wire.name === 'RangeError' ? new RangeError(wire.message) : new Error(wire.message);
  if (wire.name !== error.name) error.name = wire.name;
  if (cause !== undefined) error.cause = cause;
  return error;
}
