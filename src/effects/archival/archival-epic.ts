import { EMPTY, Observable, catchError, defer, exhaustMap, firstValueFrom, from, interval, merge, mergeMap, of, retry, timer } from 'rxjs';
import { archival } from '../../reducers/archival/machine.js';
import { exponentialDelay } from '../../reducers/backoff.js';
import { errorText } from '../../reducers/error-text.js';
import type { AnyMachine } from '../../reducers/machine.js';
import { machines as builtInMachines } from '../../reducers/machines.js';
import type { ColdStore } from '../../streams/archive/cold-store.js';
import { readManifest } from '../../streams/archive/read-archive.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import type { RuneStore, StreamHead } from '../../streams/store.js';
import { archivalRunEffects, type ArchivalRunOutput } from './archival-run.js';
import { archivalStream, targetOf } from './archival-streams.js';
import { archiveStream, notSealed, pruneArchived, streamsUnder } from './archive-steps.js';
import { checkRetentionRules, dueForRetention, keepOf, retentionCut, type RetentionRule } from './retention.js';

/** Options of {@link archivalEpic}, with their defaults. */
export interface ArchivalOptions {
  /** The engine's store: the hot log the runs read, and prune once the archive is verified. */
  readonly store: RuneStore;
  /** Where the archives go (give the engine the same one as its `archive` option, to read them). */
  readonly cold: ColdStore;
  /** The machines of the engine, for which streams are sealed. Default: every seed machine. */
  readonly machines?: Readonly<Record<string, AnyMachine>>;
  /** The wait before the first retry of a failed write; it doubles per failed write. Default 1,000 ms. */
  readonly retryBaseMs?: number;
  /** The longest wait between retries. Default 300,000 ms (5 minutes). */
  readonly retryMaxMs?: number;
  /** Retention policies, by machine or stream prefix (see {@link RetentionRule}). Default: none (keep everything). */
  readonly retention?: readonly RetentionRule[];
  /** How often retention is enforced, on the engine's scheduler. Default 3,600,000 ms (hourly). */
  readonly retentionEveryMs?: number;
  /**
   * Called as a run is about to prune the hot runes, once its archives are written and verified
   * (its run is COMPLETED): a test stops its process there to check that a restart loses nothing.
   */
  readonly beforePrune?: (target: string) => void;
}

type Out = ArchivalRunOutput;

/** Whether a stream's head is a closed conversation, which its archived run moves on to `archived`. */
const isClosedConversation = (head: StreamHead | undefined, machines: Readonly<Record<string, AnyMachine>>): boolean =>
  head?.value === 'closed' && Object.hasOwn(machines, head.machine) && machines[head.machine]!.events.includes('archive_requested');

/**
 * The archival runs (seed 002's ArchivalService), an effect of each `archival` stream
 * `archive/<target>` in its state, so that a run cut by a crash resumes where the log says:
 *
 * 1. ARCHIVING -> `serialized`.
 * 2. WRITING_TO_R2: a sealed target (a closed conversation, a stream under one or in a final
 *    state) is written whole: the target and every stream under it, each through its head; any
 *    other target (made due by retention) only through its retention cut. Each stream's archive
 *    is written, read back and verified -> `write_succeeded`; any failure -> `write_failed{error}`.
 * 3. ERROR -> `retry` after `retryBaseMs * 2^(attempts - 1)` (at most `retryMaxMs`), a durable
 *    deadline from the failure's rune: a restart waits only what is left. RETRYING -> `rewrite`.
 * 4. COMPLETED: only now the hot runes go: a snapshot at each archive's seq, then a prune through
 *    it; a closed conversation gets `archive_requested` (-> `archived`); then `reset` -> IDLE.
 * 5. Retention: every `retentionEveryMs`, each stream whose policy makes runes due starts a run
 *    (spawned if need be), unless its run is under way. With `context.ownership` (several
 *    processes on one log, each sweeping), only the runs this process owns.
 *
 * Every step is idempotent: an archive that holds the cut is only verified again, a prune done
 * prunes nothing more, so a run resumed after kill -9 loses nothing and duplicates nothing.
 */
export function archivalEpic(options: ArchivalOptions): Epic {
  const {
    store,
    cold,
    machines = builtInMachines as Readonly<Record<string, AnyMachine>>,
    retryBaseMs = 1000,
    retryMaxMs = 300_000,
    retentionEveryMs = 3_600_000,
    beforePrune,
  } = options;
  const rules = checkRetentionRules(options.retention ?? []);
  if (!(retryBaseMs > 0) || !(retryMaxMs >= retryBaseMs))
    throw new TypeError(`archivalEpic: "retryBaseMs" must be positive and "retryMaxMs" at least it, got ${retryBaseMs} and ${retryMaxMs}`);
  if (!(retentionEveryMs > 0)) throw new TypeError(`archivalEpic: "retentionEveryMs" must be positive, got ${retentionEveryMs}`);

  /** The streams a run of `target` moves, and whether whole (sealed) or through their retention cut. */
  const planOf = async (target: string): Promise<{ heads: StreamHead[]; whole: boolean }> => {
    const head = await store.head(target);
    if (head === undefined) throw new Error(`stream "${target}" does not exist`);
    const whole = (await notSealed(store, machines, head)) === undefined;
    return { heads: whole ? await streamsUnder(store, target) : [head], whole };
  };

  const write$ = (target: string, context: EpicContext): Observable<Out> =>
    defer(async (): Promise<Out> => {
      const { heads, whole } = await planOf(target);
      for (const head of heads) {
        const cut = whole ? await firstValueFrom(context.snapshot(head.stream)) : await retentionCut(store, context, head, keepOf(rules, head), context.scheduler.now());
        if (cut !== undefined) await archiveStream(store, cold, head, cut, context.scheduler.now());
      }
      return { type: 'write_succeeded' };
    }).pipe(catchError((error: unknown) => of<Out>({ type: 'write_failed', error: errorText(error) })));

  const prune$ = (target: string, context: EpicContext): Observable<Out> =>
    defer(async (): Promise<Out[]> => {
      const { heads } = await planOf(target);
      beforePrune?.(target);
      for (const head of heads) {
        const manifest = await readManifest(cold, head.stream);
        if (manifest === undefined) continue;
        await pruneArchived(store, manifest);
        if (head.stream !== target) context.release(head.stream);
      }
      const out: Out[] = [];
      if (isClosedConversation(await store.head(target), machines)) out.push({ stream: target, event: { type: 'archive_requested' } });
      out.push({ type: 'reset' });
      return out;
    }).pipe(
      // The archive is safe: a prune that failed (the store) is tried again until it is done.
      retry({ delay: (_error, attempt) => timer(exponentialDelay(attempt, retryBaseMs, retryMaxMs), context.scheduler) }),
      mergeMap((out) => from(out)),
    );

  const runs = stateEffects({
    name: 'archival',
    machine: archival,
    states: ['ARCHIVING', 'WRITING_TO_R2', 'COMPLETED', 'ERROR', 'RETRYING'],
    withState: true,
    effects: (view, context): EffectsByKey<typeof archival> => {
      const target = targetOf(view.stream);
      if (target === undefined) return {};
      return archivalRunEffects(view, context, {
        write: () => write$(target, context),
        retryDelayMs: (attempts) => exponentialDelay(attempts, retryBaseMs, retryMaxMs),
        completed: () => prune$(target, context),
        resolutionMs: Math.min(1000, retryBaseMs),
      });
    },
  });

  const retention: Epic = (_runes$, context) =>
    rules.every((rule) => rule.keep === 'all')
      ? EMPTY
      : interval(retentionEveryMs, context.scheduler).pipe(
          exhaustMap(() =>
            defer(() => dueForRetention(store, context, rules, context.scheduler.now())).pipe(
              // Each due stream is started by the one process that owns its run (several processes
              // on one log each sweep; the others would only have their starts refused).
              mergeMap((due) => from(due.filter((head) => context.ownership?.owns(archivalStream(head.stream)) ?? true))),
              mergeMap((head) =>
                defer(async (): Promise<EpicCommand[]> => {
                  const run = archivalStream(head.stream);
                  const runHead = await store.head(run);
                  if (runHead !== undefined && runHead.value !== 'IDLE') return []; // under way: it finishes on its own
                  return [
                    { stream: run, spawn: archival.id },
                    { stream: run, event: { type: 'start' } },
                  ];
                }),
              ),
              mergeMap((commands) => from(commands)),
              catchError((error: unknown) => {
                context.report?.({ type: 'effect_failed', epic: 'archivalRetention', stream: '', error });
                return EMPTY;
              }),
            ),
          ),
        );

  return function archivalEpic(runes$, context, deps) {
    return merge(runs(runes$, context, deps), retention(runes$, context, deps));
  };
}
