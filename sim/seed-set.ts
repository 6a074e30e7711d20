/**
 * CI's fixed seeds (`test/sim/seeds.test.ts` runs each for {@link CI_STEPS} steps): seeds that pass,
 * and for each known defect a seed that finds it, expected to fail with that defect until it is
 * fixed (then its entry flips to `pass`). A long run (`npm run simulate -- --seeds 1000`) finds
 * more; a new failure's seed joins this list.
 */
export const CI_STEPS = 200;

export interface SeedExpectation {
  readonly seed: number;
  /** `'pass'`, or the name of the known defect (see `KNOWN_DEFECTS`) it is expected to fail with. */
  readonly expect: string;
}

export const CI_SEEDS: readonly SeedExpectation[] = [
  // Seeds that passed when CI's set was first picked.
  ...[37, 53, 65, 79, 84, 91, 96].map((seed) => ({ seed, expect: 'pass' })),
  // Seeds that found a defect since fixed (issue 28): each guards its fix.
  ...[123, 76, 100, 8, 9, 12, 134, 3, 1, 293, 172, 113, 74, 216, 35, 27, 39, 106, 131, 311, 115, 30].map((seed) => ({ seed, expect: 'pass' })),
  // Seeds a long run after those fixes found failing, each guarding its fix: a CLI session retried
  // after a failed spawn (6044), a chat clock after a restart (6102, 6178), an empty answer fallen
  // over from before an answer that broke off (6192, 6045).
  ...[6044, 6102, 6178, 6192, 6045].map((seed) => ({ seed, expect: 'pass' })),
  // A ReAct call's rounds answered across a restart and each under the budget (6001, 6051); a
  // running chat actor waiting on its chat's agents (6501); a turn every provider failed, with no
  // text (6483: the turn text oracle); a delegate call a paused conversation refuses (6398).
  ...[6001, 6051, 6501, 6483, 6398].map((seed) => ({ seed, expect: 'pass' })),
  // Budgets overrun by empty answers fallen over from, counted only when the answer after them
  // ended (20089, 20673, 30458, 30619): the turn now counts each as the chain falls over.
  ...[20089, 20673, 30458, 30619].map((seed) => ({ seed, expect: 'pass' })),
  // A ReAct call answered empty at the instant it started, before its lifecycle's turn.started
  // was appended: the budget oracle counts a turn started at that instant as open (40124, 45130).
  ...[40124, 45130].map((seed) => ({ seed, expect: 'pass' })),
  // A budget_replenished whose new limit is below the calls answered already: the oracle took
  // those calls for an overrun of it (66672).
  ...[66672].map((seed) => ({ seed, expect: 'pass' })),
  // A plan's agent turn whose chain fell over from an empty answer after its conversation was
  // suspended for its budget: the fall-over is another call, now refused (73231).
  ...[73231].map((seed) => ({ seed, expect: 'pass' })),
];
