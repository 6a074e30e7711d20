import type { AnyMachine } from '../../src/index.js';
import { CommitQueue } from '../../src/streams/commit-queue.js';
import { Homes } from '../../src/streams/engine/homes.js';
import type { Instance } from '../../src/streams/engine/instance.js';
import { Outlets } from '../../src/streams/engine/outlets.js';
import { Seals } from '../../src/streams/seals.js';
import type { RuneStore } from '../../src/streams/store.js';

/**
 * An engine's streams on `store` without the engine: its homes, commit queue and outlets wired as
 * `createEngine` wires them (no snapshots, no epics), for testing each part on its own.
 */
export function engineParts(store: RuneStore, machines: Readonly<Record<string, AnyMachine>>) {
  const seals = new Seals(store, machines);
  const outlets = new Outlets();
  const commits: CommitQueue<Instance> = new CommitQueue<Instance>(store, {
    published: (instance, rune) => {
      outlets.state(rune.stream, instance);
      outlets.rune(rune);
      homes.published(instance, rune, homes.isCurrent(instance));
    },
    refused: (stream) => homes.refused(stream),
    lost: (stream, runes) => homes.lost(stream, runes),
    committed: () => undefined,
  });
  const homes: Homes = new Homes({ store, machines, seals, commits, outlets, maxRaceLosses: 5, readFailed: () => {} });
  return { homes, commits, outlets, seals };
}
