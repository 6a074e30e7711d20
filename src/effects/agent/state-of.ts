import { firstValueFrom } from 'rxjs';
import type { AnyMachine, StateOf } from '../../reducers/machine.js';
import type { EpicContext } from '../../streams/epic.js';

/** A stream's durable state now (hydrated if need be), for the async steps of the agent epics. */
export const stateOf = async <M extends AnyMachine>(context: EpicContext, stream: string, machine: M): Promise<StateOf<M> | undefined> =>
  (await firstValueFrom(context.snapshot(stream, machine)))?.state;
