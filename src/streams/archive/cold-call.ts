import { errorText } from '../../reducers/error-text.js';
import { ColdKeyError } from './cold-key.js';
import { ArchiveError } from './cold-store.js';

/**
 * Calls the cold store: its `ArchiveError`s and key errors pass as they are; anything else a store
 * throws becomes `cold_store_failed`, so a caller branches on one set of codes whatever the store.
 */
export async function coldCall<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ArchiveError || error instanceof ColdKeyError) throw error;
    throw new ArchiveError('cold_store_failed', `cold store: ${what} failed: ${errorText(error)}`, { cause: error });
  }
}
