import type { JsonPatchOperation } from '@ag-ui/core';

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A JSON Pointer segment: `~` and `/` escaped (RFC 6901). */
const pointer = (key: string): string => key.replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * The JSON Patch (RFC 6902) that turns `before` into `after`, two JSON values: objects are
 * compared key by key (`add`, `remove`, and recursion into objects on both sides); anything else
 * that differs (arrays included, as a whole) is one `replace`. Equal values give `[]`.
 *
 * ## Example
 * ```ts
 * import { jsonPatch } from './json-patch.js';
 * console.log(jsonPatch({ status: 'idle', calls: { c1: 'a' } }, { status: 'streaming', calls: { c1: 'a', c2: 'b' } }));
 * // Logs: [ { op: 'replace', path: '/status', value: 'streaming' }, { op: 'add', path: '/calls/c2', value: 'b' } ]
 * ```
 */
export function jsonPatch(before: unknown, after: unknown, path = ''): JsonPatchOperation[] {
  if (isRecord(before) && isRecord(after)) {
    const operations: JsonPatchOperation[] = [];
    for (const key of Object.keys(before)) {
      if (!(key in after) || after[key] === undefined) {
        if (before[key] !== undefined) operations.push({ op: 'remove', path: `${path}/${pointer(key)}` });
      } else operations.push(...jsonPatch(before[key], after[key], `${path}/${pointer(key)}`));
    }
    for (const key of Object.keys(after)) {
      if ((!(key in before) || before[key] === undefined) && after[key] !== undefined) operations.push({ op: 'add', path: `${path}/${pointer(key)}`, value: after[key] });
    }
    return operations;
  }
  return JSON.stringify(before) === JSON.stringify(after) ? [] : [{ op: 'replace', path, value: after }];
}
