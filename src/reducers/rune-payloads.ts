import { z, type ZodType } from 'zod';
import type { EventObject } from './machine.js';
import { SPAWN_EVENT_TYPE } from './rune.js';
import { edgesOf, type PayloadSchemas, type TableMachine } from './table.js';

/** A discriminated union's members, each with its literal `type` (zod v4 classic). */
type EventMembers = readonly { readonly shape: { readonly type: { readonly values: ReadonlySet<unknown> } } }[];

/**
 * The schema of each rune kind's `event`, generated from a table machine's table: a rune of kind
 * `K` carries one of the events whose rows append `K` (the seed's kinds group events:
 * `tool.result` is any of a call's outcomes), and the spawn kind carries `{ type: 'spawn', input }`.
 * Validate a stored or received rune's event by its kind with it; its payload, with
 * {@link runePayloadSchemas}.
 *
 * ## Example
 * ```ts
 * import { runeEventSchemas, toolCall } from 'runestream';
 * const events = runeEventSchemas(toolCall);
 * console.log(events['tool.result']!.safeParse({ type: 'success', output: 3 }).success); // Logs: true
 * console.log(events['tool.result']!.safeParse({ type: 'approved' }).success); // Logs: false
 * ```
 */
export function runeEventSchemas<S extends { value: string }, E extends EventObject, I, P extends PayloadSchemas>(
  machine: TableMachine<S, E, I, P>,
): Readonly<Record<string, ZodType>> {
  const members = (machine.schemas.event as unknown as { options?: EventMembers }).options;
  if (members === undefined) throw new TypeError(`runeEventSchemas: the event schema of "${machine.id}" is not a discriminated union on "type"`);
  const memberOf = new Map<unknown, EventMembers[number]>();
  for (const member of members) for (const type of member.shape.type.values) memberOf.set(type, member);
  const typesByKind = new Map<string, Set<string>>();
  for (const edge of edgesOf(machine)) {
    let types = typesByKind.get(edge.kind);
    if (types === undefined) typesByKind.set(edge.kind, (types = new Set()));
    types.add(edge.on);
  }
  // A machine spawned with no input (`z.void()`) stores its spawn as `{type: 'spawn'}`: JSON keeps no undefined key.
  const input = machine.schemas.input.safeParse(undefined).success ? machine.schemas.input.optional() : machine.schemas.input;
  const schemas: Record<string, ZodType> = {
    [machine.spawnKind]: z.object({ type: z.literal(SPAWN_EVENT_TYPE), input }),
  };
  for (const [kind, types] of typesByKind) {
    const options = [...types].map((type) => memberOf.get(type) as unknown as ZodType);
    schemas[kind] = options.length === 1 ? options[0]! : z.union(options as [ZodType, ZodType, ...ZodType[]]);
  }
  return schemas;
}

/**
 * The schema of each rune kind's `payload`: the fields seed 003's rune tables give that kind,
 * camelCase, typed per kind (`z.infer<typeof schemas['tool.result']>`). These are the machine's own
 * `payloads`, the single source of each kind's payload type; a kind not listed carries no payload.
 * A kind's schema belongs to its machine: `turn.started` of an agent's lifecycle names the agent and
 * the turn, `turn.started` of its turn stream also the input.
 *
 * ## Example
 * ```ts
 * import { runePayloadSchemas, toolCall } from 'runestream';
 * const payloads = runePayloadSchemas(toolCall);
 * console.log(payloads['tool.result'].safeParse({ callId: 'c1', status: 'timeout' }).success); // Logs: true
 * console.log(payloads['tool.result'].safeParse({ callId: 'c1', status: 'lost' }).success); // Logs: false
 * ```
 */
export function runePayloadSchemas<S extends { value: string }, E extends EventObject, I, P extends PayloadSchemas>(machine: TableMachine<S, E, I, P>): P {
  return machine.payloads;
}
