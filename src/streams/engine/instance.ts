import type { AnyMachine } from '../../reducers/machine.js';
import type { Committable } from '../commit-queue.js';
import type { Hold } from '../seals.js';
import type { SnapshotSubject } from '../snapshots.js';
import { StreamReadError } from '../stream-read-error.js';

/** A machine instance in memory. Kept small: a million of them may be idle at once. */
export interface Instance extends Committable, SnapshotSubject {
  readonly stream: string;
  readonly machine: AnyMachine;
  /** Includes accepted events whose runes are not durable yet. */
  state: unknown;
  seq: number;
  /** The `at` of its last rune: a later rune's `at` is never earlier. */
  at: number;
  /** What subscribers see: the state as of the last durable rune (set by the commit queue). */
  durableState: unknown;
  durableSeq: number;
  /** Durable runes since the last snapshot. */
  sinceSnapshot: number;
  /** Leave memory as soon as every rune is durable. */
  releasing: boolean;
  /** Why it is sealed (see `Seals`), as of the seal generation `sealGeneration`: checked again only when a new seal is made. */
  sealedBy: string | undefined;
  /** What holds back some of its events (see `Seals.hold`), as of the same generation. */
  heldBy: Hold | undefined;
  sealGeneration: number;
}

/** An instance of `machine` at `state` after `seq` durable runes (the last at `at`), nothing pending. */
export const durableInstance = (stream: string, machine: AnyMachine, state: unknown, seq: number, at: number, sinceSnapshot: number): Instance => ({
  stream,
  machine,
  state,
  seq,
  at,
  durableState: state,
  durableSeq: seq,
  sinceSnapshot,
  releasing: false,
  sealedBy: undefined,
  heldBy: undefined,
  sealGeneration: -1,
});

/** A new instance of `machine` at `state`, its spawn (seq 1, at `at`) not durable yet. */
export function spawnedInstance(stream: string, machine: AnyMachine, state: unknown, at: number): Instance {
  const instance = durableInstance(stream, machine, state, 1, at, 0);
  instance.durableState = undefined;
  instance.durableSeq = 0;
  return instance;
}

/** A stored stream whose machine this engine does not host: a configuration mistake, not a crash. */
export const unknownMachine = (stream: string, machine: string): StreamReadError =>
  new StreamReadError('unknown_machine', `stream "${stream}" was spawned as machine "${machine}", which this engine does not host`);

export const isUnknownMachine = (error: unknown): error is StreamReadError => error instanceof StreamReadError && error.code === 'unknown_machine';

/**
 * The refusal of a rune written by a newer version of its machine than `machine`, the running
 * one; `undefined` for a rune this code reads (its version, 1 when absent, is not newer).
 */
export function newerVersion(rune: { readonly stream: string; readonly seq: number; readonly v?: number | undefined }, machine: AnyMachine): StreamReadError | undefined {
  if (rune.v === undefined || rune.v <= machine.version) return undefined;
  return new StreamReadError(
    'newer_version',
    `stream "${rune.stream}": rune ${rune.seq} was written by version ${rune.v} of machine "${machine.id}", and this code runs version ${machine.version}; it is refused, never misread`,
  );
}

/** A stream that cannot be loaded for a reason a dispatch is refused with, not failed by: its machine is not hosted, or is older than its runes. */
export const isRefusedStream = (error: unknown): error is StreamReadError & { readonly code: 'unknown_machine' | 'newer_version' } =>
  error instanceof StreamReadError && (error.code === 'unknown_machine' || error.code === 'newer_version');
