import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { checkColdKey, checkColdPrefix } from './cold-key.js';
import { coldCall } from './cold-call.js';
import type { ColdStore } from './cold-store.js';

/**
 * A cold store in a folder: each object is a file at its key's path under `dir` (`streams/a/manifest.json`
 * is `<dir>/streams/a/manifest.json`).
 *
 * 1. Keys are checked first ({@link checkColdKey}): a bad one is refused with a `ColdKeyError`
 *    (code `invalid_cold_key`) and touches nothing, so no key reaches outside `dir`.
 * 2. `put` is atomic: it writes a temporary file in `<dir>/.tmp/` (a name starting with `.`, which
 *    no key part may, so `list` never shows it), flushes it to disk, and renames it over the target.
 *    A reader sees the old object or the new one, never half of one. A put that fails (a full
 *    disk, a file too large) removes its temporary file before it rejects.
 * 3. A crash mid-put can still leave a temporary file: the store's first `put` sweeps `.tmp/` of
 *    those older than `staleTempMs` first (younger ones may be another process's puts in progress).
 * 4. Any I/O failure is an `ArchiveError` with code `cold_store_failed`, its cause the Node error.
 *
 * @example
 * ```ts
 * import { mkdtempSync } from 'node:fs';
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import { fsColdStore } from 'runestream';
 *
 * const cold = fsColdStore(mkdtempSync(join(tmpdir(), 'cold-')));
 * await cold.put('notes/a.txt', new TextEncoder().encode('hello'));
 * console.log(await cold.list('notes/')); // Logs: [ 'notes/a.txt' ]
 * console.log(await cold.get('notes/b.txt')); // Logs: undefined
 * ```
 */
export function fsColdStore(dir: string, options: FsColdStoreOptions = {}): ColdStore {
  if (typeof dir !== 'string' || dir === '') throw new TypeError('fsColdStore(dir): dir is the folder that holds the objects, a non-empty path');
  const { staleTempMs = 3_600_000 } = options;
  if (!Number.isInteger(staleTempMs) || staleTempMs < 0)
    throw new TypeError(`fsColdStore: "staleTempMs" is a non-negative integer (milliseconds), got ${String(staleTempMs)}`);
  const pathOf = (key: string) => join(dir, ...key.split('/'));
  const tempDir = join(dir, TEMP_FOLDER);
  let swept: Promise<void> | undefined;

  return {
    async put(key, body) {
      checkColdKey(key);
      const path = pathOf(key);
      const temp = join(tempDir, `${randomBytes(8).toString('hex')}.tmp`);
      await coldCall(`put "${key}"`, async () => {
        // Once per store; a sweep that fails fails this put, and the next one tries again.
        await (swept ??= sweepTemporaryFiles(tempDir, staleTempMs).catch((error: unknown) => {
          swept = undefined;
          throw error;
        }));
        await mkdir(dirname(path), { recursive: true });
        await mkdir(tempDir, { recursive: true });
        const file = await open(temp, 'w');
        try {
          try {
            await file.writeFile(body);
            await file.sync(); // durable before it is visible: an archive is verified, then hot runes go
          } finally {
            await file.close();
          }
          await rename(temp, path);
        } catch (error) {
          await rm(temp, { force: true }); // a full disk leaves no partial file behind
          throw error;
        }
      });
    },

    async get(key) {
      checkColdKey(key);
      return coldCall(`get "${key}"`, async () => {
        try {
          return new Uint8Array(await readFile(pathOf(key)));
        } catch (error) {
          // Not there, or a folder (a prefix of other keys): no object of that key.
          if (isCode(error, 'ENOENT') || isCode(error, 'EISDIR') || isCode(error, 'ENOTDIR')) return undefined;
          throw error;
        }
      });
    },

    async list(prefix) {
      checkColdPrefix(prefix);
      // Walk only the folder the prefix's complete parts name; its last part filters names there.
      const cut = prefix.lastIndexOf('/');
      const base = cut < 0 ? '' : prefix.slice(0, cut);
      const keys: string[] = [];
      await coldCall(`list "${prefix}"`, () => walk(base, keys, prefix));
      return keys.sort();
    },

    async delete(key) {
      checkColdKey(key);
      await coldCall(`delete "${key}"`, () => rm(pathOf(key), { force: true }));
    },
  };

  async function walk(folder: string, keys: string[], prefix: string): Promise<void> {
    let entries;
    try {
      entries = await readdir(folder === '' ? dir : pathOf(folder), { withFileTypes: true });
    } catch (error) {
      if (isCode(error, 'ENOENT') || isCode(error, 'ENOTDIR')) return;
      throw error;
    }
    for (const entry of entries) {
      if (entry.name.startsWith('.')) continue; // a temporary file, or nothing a key names
      const key = folder === '' ? entry.name : `${folder}/${entry.name}`;
      if (entry.isDirectory()) {
        if (key.startsWith(prefix) || prefix.startsWith(`${key}/`)) await walk(key, keys, prefix);
      } else if (entry.isFile() && key.startsWith(prefix)) keys.push(key);
    }
  }
}

/** Options of {@link fsColdStore}. */
export interface FsColdStoreOptions {
  /**
   * A temporary file in `<dir>/.tmp/` older than this (by its modification time) is what a put
   * that died (a crash) left: the store's first `put` removes it. Younger ones are left alone (a
   * put in progress in another process sharing the folder). Default: 3,600,000 (an hour).
   */
  readonly staleTempMs?: number;
}

/** Where puts write their temporary files, beside the objects (one file system, so the rename is atomic). */
const TEMP_FOLDER = '.tmp';

/** Removes the temporary files in `tempDir` older than `staleMs`; a folder not there yet has none. */
async function sweepTemporaryFiles(tempDir: string, staleMs: number): Promise<void> {
  let names: string[];
  try {
    names = await readdir(tempDir);
  } catch (error) {
    if (isCode(error, 'ENOENT')) return;
    throw error;
  }
  const before = Date.now() - staleMs;
  for (const name of names) {
    const path = join(tempDir, name);
    const modified = await stat(path).then(
      (stats) => stats.mtimeMs,
      () => Number.POSITIVE_INFINITY, // gone meanwhile (another process's sweep or rename)
    );
    if (modified < before) await rm(path, { force: true });
  }
}

const isCode = (error: unknown, code: string): boolean => (error as { code?: unknown } | null)?.code === code;
