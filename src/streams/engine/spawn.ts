import type { SchedulerLike } from 'rxjs';
import type { AnyMachine } from '../../reducers/machine.js';
import { SPAWN_EVENT_TYPE, type Rune } from '../../reducers/rune.js';
import { CALLER_ORIGIN, type RuneOrigin } from '../../reducers/rune-origin.js';
import { describeIssues, parseBounded } from '../../reducers/validate.js';
import type { ValueCheck } from '../../reducers/value-limits.js';
import type { CommitQueue } from '../commit-queue.js';
import type { Seals } from '../seals.js';
import { PromisedDispatch, promiseSink } from '../submit.js';
import { valueOf } from './apply.js';
import type { Homes } from './homes.js';
import { isRefusedStream, spawnedInstance, type Instance } from './instance.js';
import { existsReason, notAStreamId, rejected, refusedValue, type DispatchResult } from './rejections.js';

/** What a spawn works with. */
export interface SpawnsOf {
  readonly homes: Homes;
  readonly commits: CommitQueue<Instance>;
  readonly seals: Seals;
  readonly scheduler: SchedulerLike;
  readonly machines: Readonly<Record<string, AnyMachine>>;
  /** The engine's limits and storable strings, in one walk. */
  readonly checkValue: ValueCheck;
}

/**
 * Creates `stream` as an instance of `machineOrId` with `input`: checked (the stream id, the
 * machine, the limits, its input schema, where its machine's instances live, the other kind of the
 * same agent), then its stream claimed (see `Homes.claim`) and its seq-1 rune committed. Resolves
 * to the durable spawn rune, or why nothing was appended (`stream_exists` when the store has it).
 */
export async function spawnStream(
  of: SpawnsOf,
  stream: string,
  machineOrId: string | AnyMachine,
  input: unknown,
  origin: RuneOrigin = CALLER_ORIGIN,
): Promise<DispatchResult> {
  const { homes, commits, seals, scheduler, machines } = of;
  const notAnId = notAStreamId(stream);
  if (notAnId !== undefined) return notAnId;
  // Own properties only: "constructor" or "__proto__" must not find Object's.
  const machine = typeof machineOrId !== 'string' ? machineOrId : Object.hasOwn(machines, machineOrId) ? machines[machineOrId] : undefined;
  if (machine === undefined) {
    return rejected('unknown_machine', `unknown machine ${JSON.stringify(String(machineOrId).slice(0, 64))}; this engine hosts: ${Object.keys(machines).join(', ')}`);
  }
  const violation = of.checkValue(input, 'input');
  if (violation !== undefined) return refusedValue(violation, 'invalid_input');
  const parsed = parseBounded(machine.schemas.input, input);
  if (!parsed.success) return rejected('invalid_input', `invalid input for "${machine.id}": ${describeIssues(parsed.issues, parsed.partial)}`);
  if (homes.get(stream) !== undefined) return rejected('stream_exists', existsReason(machine, stream));
  // What the stream id says of the input, filled in (a turn engine's agent): stored so, in the spawn rune.
  const completed = machine.inputAt === undefined ? parsed.data : machine.inputAt(stream, parsed.data);
  const misplaced = machine.streamReason?.(stream, completed);
  if (misplaced !== undefined) return rejected('invalid_stream', misplaced);
  const outOfLayout = machine.layoutReason?.(stream);
  if (outOfLayout !== undefined) return rejected('invalid_layout', outOfLayout);
  const otherKind = machine.otherKindOf?.(stream);
  let conflict: DispatchResult | undefined;

  // Claim the id at once, while a load in progress (a dispatch or subscription that came first)
  // and the store are asked, so a spawn or dispatch made after this one waits for it; if the
  // stream exists already, the dispatchers get it hydrated and the spawn is refused.
  let spawned: Promise<DispatchResult> | undefined;
  const create = (): Instance => spawnedInstance(stream, machine, machine.initial(completed), scheduler.now());
  const admit = (instance: Instance): void => {
    const to = valueOf(instance.state);
    const event = { type: SPAWN_EVENT_TYPE, input: completed };
    const { at } = instance;
    const rune: Rune =
      to === undefined
        ? { stream, seq: 1, machine: machine.id, kind: machine.spawnKind, event, at, origin }
        : { stream, seq: 1, machine: machine.id, kind: machine.spawnKind, event, to, at, origin };
    if (machine.spawnPayload !== undefined) rune.payload = machine.spawnPayload(completed, instance.state);
    if (machine.version !== 1) rune.v = machine.version;
    const call = new PromisedDispatch();
    commits.enqueue(instance, rune, instance.state, promiseSink, call);
    spawned = call.promise();
  };
  const rival =
    otherKind === undefined
      ? undefined
      : {
          stream: otherKind,
          found: () => {
            conflict = rejected('agent_kind_conflict', `an agent has one kind: "${otherKind}" exists, so "${stream}" (${machine.id}) cannot be spawned beside it`);
          },
        };
  // Stored already, under a machine this engine does not host or by a newer version of it: it exists all the same.
  const existing = await homes.claim(stream, create, admit, rival).catch((error: unknown) => (isRefusedStream(error) ? null : Promise.reject(error)));
  const sealedBy = existing === undefined ? seals.refusal(stream) : undefined;
  if (sealedBy !== undefined) return rejected('sealed', sealedBy);
  return spawned ?? conflict ?? rejected('stream_exists', existsReason(machine, stream));
}
