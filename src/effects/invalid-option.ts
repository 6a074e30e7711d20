import { z } from 'zod';

/**
 * An option given to an epic (or the epics of `agentEpics`) out of its range: code
 * `invalid_option`, the message naming the option, its range and the value given. Thrown when the
 * epics are made, before any stream is touched.
 */
export class InvalidOptionError extends RangeError {
  override readonly name = 'InvalidOptionError';
  readonly code = 'invalid_option';
  constructor(
    /** The option's name, e.g. `errorThreshold`. */
    readonly option: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * An option checked by its schema (the one the server configuration checks it with too): its
 * value; out of range, an {@link InvalidOptionError} saying who was given it (`who`), e.g.
 * `agentEpics: "errorThreshold" Too small: expected number to be >=1, got 0`.
 */
export function checkedOption<T>(schema: z.ZodType<T>, option: string, value: unknown, who: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new InvalidOptionError(option, `${who}: "${option}" ${z.prettifyError(parsed.error).replace(/^✖ /, '').replaceAll('\n', '; ')}, got ${String(value)}`);
  return parsed.data;
}
