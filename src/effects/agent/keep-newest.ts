/**
 * How many entries an epic keeps of what it told and the store may not show yet (an agent's last
 * ended turn, a conversation told of an error, a suspension sent): the oldest are forgotten first,
 * long durable by then.
 */
export const KEPT_UNSETTLED = 10_000;

/**
 * Sets `key` to `value` in `map` as its newest entry, forgetting the oldest beyond `max`: a
 * memory of what is not durable yet that cannot grow without bound.
 */
export function keepNewest<K, V>(map: Map<K, V>, key: K, value: V, max = KEPT_UNSETTLED): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value!);
}
