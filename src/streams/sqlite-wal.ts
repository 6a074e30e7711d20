import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/**
 * Where a SQLite write-ahead log (a `-wal` file) is damaged so that SQLite would drop committed
 * transactions without a word, and how many it would drop.
 */
export interface WalDamage {
  /** The first frame SQLite would not accept (0-based; -1: the WAL's header). */
  readonly frame: number;
  /** The byte offset of that frame (0 for the header). */
  readonly offset: number;
  /** Transactions committed after it (commit frames that are intact and of this WAL's generation): what recovery would drop. */
  readonly lostCommits: number;
}

const HEADER_BYTES = 32;
const FRAME_HEADER_BYTES = 24;
const MAGIC_LE = 0x37_7f_06_82;
const MAGIC_BE = 0x37_7f_06_83;

/** SQLite's WAL checksum (a Fletcher-like sum of 32-bit words, two at a time), continued from `s`. */
function walChecksum(bytes: Buffer, start: number, end: number, bigEndian: boolean, s: readonly [number, number]): [number, number] {
  let [s0, s1] = s;
  for (let i = start; i < end; i += 8) {
    const a = bigEndian ? bytes.readUInt32BE(i) : bytes.readUInt32LE(i);
    const b = bigEndian ? bytes.readUInt32BE(i + 4) : bytes.readUInt32LE(i + 4);
    s0 = (s0 + a + s1) >>> 0;
    s1 = (s1 + b + s0) >>> 0;
  }
  return [s0, s1];
}

/**
 * Reads the WAL at `walPath` (whose database's pages are `pageSize` bytes) without SQLite, and
 * finds damage that SQLite's recovery would hide: recovery accepts frames while their salts and
 * cumulative checksums hold and stops at the first that fails, silently dropping every transaction
 * committed after it. So a flipped bit in the middle of a WAL loses acknowledged writes.
 *
 * 1. Frames are checked as recovery checks them, up to the first that fails (or a header that fails).
 * 2. After it, each frame of the same generation (the header's salts) is checked against its own
 *    predecessor's stored checksum, which recovery does not do: an intact commit frame there is a
 *    transaction that was committed and would be dropped.
 * 3. What a crash legitimately leaves is not damage: a last frame cut short, frames of a
 *    transaction never committed, frames of an older generation (other salts) after the end.
 *
 * `undefined` when nothing committed would be lost (or there is no WAL). One frame is read at a time.
 */
export function walDamage(walPath: string, pageSize: number): WalDamage | undefined {
  let fd: number;
  try {
    fd = openSync(walPath, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const size = fstatSync(fd).size;
    if (size < HEADER_BYTES) return undefined;
    const header = Buffer.alloc(HEADER_BYTES);
    readSync(fd, header, 0, HEADER_BYTES, 0);
    const magic = header.readUInt32BE(0);
    // A damaged magic leaves the byte order unknown: the one under which the frames hold.
    const orders = magic === MAGIC_BE ? [true] : magic === MAGIC_LE ? [false] : [true, false];
    const frameBytes = FRAME_HEADER_BYTES + pageSize;
    const frames = Math.floor((size - HEADER_BYTES) / frameBytes);
    const salts = header.subarray(16, 24);
    let found: WalDamage | undefined;
    for (const bigEndian of orders) {
      const stored = (bytes: Buffer, at: number): [number, number] => [bytes.readUInt32BE(at), bytes.readUInt32BE(at + 4)];
      const headerOk = orders.length === 1 && header.readUInt32BE(8) === pageSize && sameSum(walChecksum(header, 0, 24, bigEndian, [0, 0]), stored(header, 24));
      let bad = headerOk ? undefined : -1;
      let previous = stored(header, 24); // recovery's running checksum, then (past the bad frame) the predecessor's stored one
      let lostCommits = 0;
      const frame = Buffer.alloc(frameBytes);
      for (let i = 0; i < frames; i++) {
        readSync(fd, frame, 0, frameBytes, HEADER_BYTES + i * frameBytes);
        const sum = walChecksum(frame, FRAME_HEADER_BYTES, frameBytes, bigEndian, walChecksum(frame, 0, 8, bigEndian, previous));
        const holds = frame.subarray(8, 16).equals(salts) && frame.readUInt32BE(0) !== 0 && sameSum(sum, stored(frame, 16));
        previous = stored(frame, 16);
        if (bad === undefined) {
          if (!holds) bad = i;
        } else if (holds && frame.readUInt32BE(4) !== 0) lostCommits++;
      }
      if (bad !== undefined && lostCommits > 0 && (found === undefined || lostCommits > found.lostCommits)) {
        found = { frame: bad, offset: bad < 0 ? 0 : HEADER_BYTES + bad * frameBytes, lostCommits };
      }
    }
    return found;
  } finally {
    closeSync(fd);
  }
}

const sameSum = (a: readonly [number, number], b: readonly [number, number]): boolean => a[0] === b[0] && a[1] === b[1];
