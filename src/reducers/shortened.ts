/** The hex digits of the hash a shortened text ends with. */
const DIGEST_DIGITS = 8;

/** FNV-1a (32 bits) of a string's UTF-16 code units, as 8 hex digits: cheap, pure, the same everywhere. */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(16).padStart(DIGEST_DIGITS, '0');
}

/**
 * `text` as it is when it has at most `max` characters (UTF-16 code units); else its start,
 * `marker`, and 8 hex digits of a hash of the whole text (FNV-1a, 32 bits), `max` characters in
 * all (one less where the cut would split a surrogate pair). The same text is always cut the same way, and two long texts with the same start stay
 * apart (but for a hash collision). `max` must leave room for the marker and the digits.
 *
 * ## Example
 * ```ts
 * import { shortened } from './shortened.js';
 * console.log(shortened('clock', 16)); // Logs: clock
 * console.log(shortened('a'.repeat(1000), 16)); // Logs: aaaaaaa…1dd9658d
 * console.log(shortened('a'.repeat(1000), 16, '_')); // Logs: aaaaaaa_1dd9658d
 * ```
 */
export function shortened(text: string, max: number, marker = '…'): string {
  if (text.length <= max) return text;
  let keep = Math.max(0, max - marker.length - DIGEST_DIGITS);
  const last = text.charCodeAt(keep - 1);
  if (last >= 0xd800 && last <= 0xdbff) keep--; // a high surrogate: keep its pair whole, or neither
  return `${text.slice(0, keep)}${marker}${fnv1a(text)}`;
}
