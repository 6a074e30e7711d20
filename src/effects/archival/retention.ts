import { firstValueFrom } from 'rxjs';
import type { EpicContext } from '../../streams/epic.js';
import type { RuneStore, Snapshot, StreamHead } from '../../streams/store.js';
import { ARCHIVAL_PREFIX } from './archival-streams.js';

/** How much of a stream's history the hot log keeps; what it does not keep is archived, then pruned. */
export type RetentionKeep = 'all' | 'since-snapshot' | { readonly days: number };

/**
 * A retention policy for the streams it matches (every field narrows; none: every stream). The
 * first rule that matches a stream is its policy; a stream no rule matches keeps everything.
 */
export interface RetentionRule {
  /** Only streams of this machine id. */
  readonly machine?: string;
  /** Only streams whose id starts with this. */
  readonly prefix?: string;
  /**
   * `'all'`: keep every rune. `'since-snapshot'`: keep the runes after the stream's newest
   * snapshot. `{ days }`: keep the last `days` days: a stream idle for longer is archived whole;
   * else the runes up to its newest snapshot once that snapshot's rune is older than the window
   * (so the hot log keeps at least the window, and at most a snapshot interval more).
   */
  readonly keep: RetentionKeep;
}

const DAY_MS = 86_400_000;

/** The rules, checked: a bad one throws a TypeError naming it. */
export function checkRetentionRules(rules: unknown): readonly RetentionRule[] {
  if (!Array.isArray(rules)) throw new TypeError(`archival: "retention" must be an array of { machine?, prefix?, keep }, got ${String(rules)}`);
  rules.forEach((rule: Partial<RetentionRule>, i) => {
    const where = `archival: "retention"[${i}]`;
    if (typeof rule !== 'object' || rule === null) throw new TypeError(`${where} must be { machine?, prefix?, keep }, got ${String(rule)}`);
    if (rule.machine !== undefined && typeof rule.machine !== 'string') throw new TypeError(`${where}.machine must be a machine id`);
    if (rule.prefix !== undefined && typeof rule.prefix !== 'string') throw new TypeError(`${where}.prefix must be a string`);
    const { keep } = rule;
    const days = typeof keep === 'object' && keep !== null ? keep.days : undefined;
    if (keep !== 'all' && keep !== 'since-snapshot' && !(typeof days === 'number' && days > 0 && Number.isFinite(days))) {
      throw new TypeError(`${where}.keep must be 'all', 'since-snapshot' or { days: a positive number }, got ${JSON.stringify(keep)}`);
    }
  });
  return rules as readonly RetentionRule[];
}

const matches = (rule: RetentionRule, head: StreamHead): boolean =>
  (rule.machine === undefined || rule.machine === head.machine) && (rule.prefix === undefined || head.stream.startsWith(rule.prefix));

/** The policy of a stream: its first matching rule's, `'all'` when none matches (and for archival runs themselves). */
export const keepOf = (rules: readonly RetentionRule[], head: StreamHead): RetentionKeep =>
  head.stream.startsWith(ARCHIVAL_PREFIX) ? 'all' : (rules.find((rule) => matches(rule, head))?.keep ?? 'all');

/**
 * Where retention cuts a stream at time `now`: the seq through which its runes go to the archive
 * (and then out of the hot log), and the state after it; `undefined` when nothing is due.
 */
export async function retentionCut(
  store: RuneStore,
  context: Pick<EpicContext, 'snapshot'>,
  head: StreamHead,
  keep: RetentionKeep,
  now: number,
): Promise<Snapshot | undefined> {
  if (keep === 'all') return undefined;
  const snapshot = await store.latestSnapshot(head.stream);
  if (keep === 'since-snapshot') return snapshot;
  const before = now - keep.days * DAY_MS;
  if (head.at <= before) return firstValueFrom(context.snapshot(head.stream));
  if (snapshot === undefined) return undefined;
  const [rune] = await store.read(head.stream, snapshot.seq - 1, 1);
  return rune?.seq === snapshot.seq && rune.at <= before ? snapshot : undefined;
}

/** The streams the rules make due now: each with hot runes at or below its cut. */
export async function dueForRetention(store: RuneStore, context: Pick<EpicContext, 'snapshot'>, rules: readonly RetentionRule[], now: number): Promise<StreamHead[]> {
  const due: StreamHead[] = [];
  const seen = new Set<string>();
  for (const rule of rules) {
    if (rule.keep === 'all') continue;
    const query = { ...(rule.machine === undefined ? {} : { machine: rule.machine }), ...(rule.prefix === undefined ? {} : { prefix: rule.prefix }) };
    for await (const head of store.heads(query)) {
      if (seen.has(head.stream) || keepOf(rules, head) !== rule.keep) continue;
      seen.add(head.stream);
      const cut = await retentionCut(store, context, head, rule.keep, now);
      const oldest = (await store.read(head.stream, 0, 1))[0]?.seq;
      if (cut !== undefined && oldest !== undefined && oldest <= cut.seq) due.push(head);
    }
  }
  return due;
}
