import { z, type ZodType } from 'zod';
import type { EventObject } from './machine.js';
import { SPAWN_EVENT_TYPE } from './rune.js';
import { edgesOf, type TableMachine } from './table.js';

/** A discriminated union's members, each with its literal `type` (zod v4 classic). */
type EventMembers = readonly { readonly shape: { readonly type: { readonly values: ReadonlySet<unknown> } } }[];

/**
 * The schema of each rune kind a table machine appends, generated from its table: a rune of kind
 * `K` carries one of the events whose rows append `K` (the seed's kinds group events:
 * `tool.result` is any of a call's outcomes), and the spawn kind carries `{ type: 'spawn', input }`.
 * Validate a stored or received rune's payload by its kind with it; the agents' issue adds the
 * seed's payload fields to these kinds.
 *
 * ## Example
 * ```ts
 * import { runePayloadSchemas, toolCall } from 'runestream';
 * const payloads = runePayloadSchemas(toolCall);
 * console.log(payloads['tool.result']!.safeParse({ type: 'success', output: 3 }).success); // true
 * console.log(payloads['tool.result']!.safeParse({ type: 'approved' }).success); // false
 * ```
 */
export function runePayloadSchemas<S extends { value: string }, E extends EventObject, I>(machine: TableMachine<S, E, I>): Readonly<Record<string, ZodType>> {
  const members = (machine.schemas.event as unknown as { options?: EventMembers }).options;
  if (members === undefined) throw new TypeError(`runePayloadSchemas: the event schema of "${machine.id}" is not a discriminated union on "type"`);
  const memberOf = new Map<unknown, EventMembers[number]>();
  for (const member of members) for (const type of member.shape.type.values) memberOf.set(type, member);
  const typesByKind = new Map<string, Set<string>>();
  for (const edge of edgesOf(machine)) {
    let types = typesByKind.get(edge.kind);
    if (types === undefined) typesByKind.set(edge.kind, (types = new Set()));
    types.add(edge.on);
  }
  const schemas: Record<string, ZodType> = {
    [machine.spawnKind]: z.object({ type: z.literal(SPAWN_EVENT_TYPE), input: machine.schemas.input }),
  };
  for (const [kind, types] of typesByKind) {
    const options = [...types].map((type) => memberOf.get(type) as unknown as ZodType);
    schemas[kind] = options.length === 1 ? options[0]! : z.union(options as [ZodType, ZodType, ...ZodType[]]);
  }
  return schemas;
}
