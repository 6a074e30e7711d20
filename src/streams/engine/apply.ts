import type { EventObject } from '../../reducers/machine.js';
import type { Rune } from '../../reducers/rune.js';
import type { RuneOrigin } from '../../reducers/rune-origin.js';
import { eventRejection, parseBounded } from '../../reducers/validate.js';
import type { CommitQueue } from '../commit-queue.js';
import type { Seals } from '../seals.js';
import type { DispatchSink } from '../submit.js';
import type { Instance } from './instance.js';
import { rejected } from './rejections.js';

/** A state's `value` when it is a string: the state name a rune's `from` and `to` carry. */
export const valueOf = (state: unknown): string | undefined => {
  const value = typeof state === 'object' && state !== null ? (state as { value?: unknown }).value : undefined;
  return typeof value === 'string' ? value : undefined;
};

/**
 * Applies an event dispatched at `dispatchedAt` (scheduler time) by `origin` to an instance in memory: refused
 * if a stream above seals the instance or holds the event's type back, else validated by the
 * machine's schema and stepped; an accepted event's rune goes to the commit queue, which tells
 * `sink` once it is durable. Every refusal is told to `sink` at once.
 */
export function applyEvent<T>(
  instance: Instance,
  value: unknown,
  dispatchedAt: number,
  origin: RuneOrigin,
  sink: DispatchSink<T>,
  token: T,
  seals: Seals,
  commits: CommitQueue<Instance>,
): void {
  // Looked up again only after a new seal: one comparison a dispatch on the hot path.
  if (instance.sealGeneration !== seals.generation) {
    instance.sealedBy = seals.refusal(instance.stream);
    instance.heldBy = seals.hold(instance.stream);
    instance.sealGeneration = seals.generation;
  }
  if (instance.sealedBy !== undefined) return sink.result(rejected('sealed', instance.sealedBy), token);
  if (instance.heldBy !== undefined) {
    const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
    if (typeof type === 'string' && instance.heldBy.types.has(type)) {
      return sink.result(rejected('held', `event "${type}" is held back: ${instance.heldBy.by} (its streams take no ${type} until it is not)`), token);
    }
  }
  const { machine } = instance;
  const parsed = parseBounded(machine.schemas.event, value);
  if (!parsed.success) {
    const { code, reason } = eventRejection(machine, value, parsed.issues, parsed.partial);
    return sink.result(rejected(code, reason), token);
  }
  const from = instance.state;
  const step = machine.step(from, parsed.data as EventObject);
  if (!step.accepted) return sink.result(rejected(step.code, step.reason), token);
  instance.state = step.state;
  const seq = ++instance.seq;
  const fromValue = valueOf(from);
  const to = valueOf(step.state);
  const { stream } = instance;
  const event = parsed.data as Rune['event'];
  const at = dispatchedAt > instance.at ? dispatchedAt : instance.at;
  instance.at = at;
  // Whole literals, the origin in them: conditional spreads, or a key added after, would cost a
  // slow copy or a change of the object's shape on the hot path.
  const rune: Rune =
    fromValue !== undefined && to !== undefined
      ? { stream, seq, machine: machine.id, kind: step.kind, event, from: fromValue, to, at, origin }
      : { stream, seq, machine: machine.id, kind: step.kind, event, at, origin };
  // Added only when there is one: a rune without payload has no `payload` key at all.
  if (step.payload !== undefined) rune.payload = step.payload;
  if (machine.version !== 1) rune.v = machine.version;
  commits.enqueue(instance, rune, step.state, sink, token);
}
