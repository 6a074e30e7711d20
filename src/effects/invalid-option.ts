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
