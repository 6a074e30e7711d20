/**
 * The key a stream's effects are owned by: a conversation's root (`conv/<c>` for every
 * `conv/<c>/...`, `chat/<c>` for every `chat/<c>/...`), else the stream itself. A conversation's
 * streams call each other's effects into being (an agent's turn spawns tool calls, a plan
 * activates agents, closing a conversation walks its streams): keyed together, they run in one
 * process, fail over together, and never wait on a lease another process holds.
 */
export function ownershipKey(stream: string): string {
  const match = /^(conv|chat)\/[^/]+/.exec(stream);
  return match === null ? stream : match[0];
}

/**
 * The shard, `0..shards-1`, whose lease owns `stream`'s effects: FNV-1a (32-bit) of its
 * {@link ownershipKey}, modulo `shards`. Stable across processes, versions and restarts: every
 * process must agree on it, so it is a fixed function of the stream's name and nothing else.
 *
 * ## Example
 * ```ts
 * import { shardOf } from 'runestream/postgres';
 * console.log(shardOf('conv/c1/agent/a/turn', 64) === shardOf('conv/c1', 64)); // true
 * ```
 */
export function shardOf(stream: string, shards: number): number {
  const key = ownershipKey(stream);
  let hash = 0x811c9dc5;
  for (let index = 0; index < key.length; index++) {
    hash ^= key.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % shards;
}
