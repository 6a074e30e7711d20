import type { ZodType } from 'zod';
import type { EventObject } from './machine.js';

interface LiteralTypeOption {
  shape?: { type?: { values?: ReadonlySet<unknown> } };
}

/**
 * The event types of a `z.discriminatedUnion('type', [...])` of objects, in schema order: a
 * machine's `events` list, read from its schema so the two cannot drift apart.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { eventTypesOf } from 'runestream';
 * const DoorEvent = z.discriminatedUnion('type', [z.object({ type: z.literal('open') }), z.object({ type: z.literal('close') })]);
 * console.log(eventTypesOf(DoorEvent)); // Logs: [ 'open', 'close' ]
 * ```
 */
export function eventTypesOf<E extends EventObject>(schema: ZodType<E>): readonly E['type'][] {
  const options = (schema as { options?: readonly LiteralTypeOption[] }).options;
  if (!Array.isArray(options)) throw new TypeError('eventTypesOf: expected a z.discriminatedUnion of objects on "type"');
  return options.flatMap((option: LiteralTypeOption) => {
    const values = option.shape?.type?.values;
    if (values === undefined) throw new TypeError('eventTypesOf: every option needs a z.literal "type"');
    return [...values] as E['type'][];
  });
}
