/**
 * The hash chain of a stream's stored runes: each rune's hash is a hash of the previous rune's hash
 * and the rune's stored text (its kind, its body, its payload and its origin, exactly as the store keeps them),
 * so a rune whose bytes change after it was written (a damaged page, a flipped bit) no longer
 * matches, and neither does a rune moved, dropped or replaced in the middle of a stream.
 *
 * It guards against damage, not an attacker: the hash is a fast 32-bit one (murmur-style
 * multiply-xor per UTF-16 unit, murmur3's finalizer), not a cryptographic one, so anyone who can
 * write the file can also write matching hashes; a damaged rune matches by chance about once in
 * 4 billion. 32 bits on purpose: a signed 32-bit integer is what SQLite binds and stores cheapest
 * (a 53-bit one made appends 20% slower, a 32-bit one costs what the bench in bench/sqlite-append.ts shows).
 *
 * The hash of the rune before a stream's first is {@link CHAIN_START}.
 */

/** The hash a stream's first rune chains from. */
export const CHAIN_START = 0;

const M = 0x5b_d1_e9_95;

/**
 * The chain's next hash, a signed 32-bit integer: of `previous` (a hash, or {@link CHAIN_START})
 * and the rune's stored texts, `payload` and `origin` null when it has none (a rune without an
 * origin hashes as runes did before they had one). Each text's length is mixed in after it, so
 * `"ab"+"c"` and `"a"+"bc"` hash apart.
 */
export function chainHash(previous: number, kind: string, body: string, payload: string | null, origin: string | null = null): number {
  let h = mixText(previous ^ 0x9e_37_79_b9, kind);
  h = mixText(h, body);
  if (payload !== null) h = mixText(h, payload);
  if (origin !== null) h = mixText(h ^ 0x6f_72_69_67, origin);
  h = Math.imul(h ^ (h >>> 16), 0x85_eb_ca_6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2_b2_ae_35);
  return h ^ (h >>> 16);
}

/** Mixes a text into `h`: two UTF-16 units a step (half the multiplies), then its length. */
function mixText(h: number, text: string): number {
  const even = text.length & ~1;
  let i = 0;
  for (; i < even; i += 2) h = Math.imul(h ^ (text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16)), M);
  if (i < text.length) h = Math.imul(h ^ text.charCodeAt(i), M);
  return Math.imul(h ^ text.length, M);
}
