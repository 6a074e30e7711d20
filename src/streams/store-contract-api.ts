import type { Rune } from '../reducers/rune.js';

/**
 * The test functions the contract runs on: vitest's, or jest's (`describe`, `it` and `expect`
 * as they come). Taken as arguments, so this file imports no test runner and ships in the
 * package.
 */
export interface ContractTestApi {
  describe(name: string, body: () => void): unknown;
  it(name: string, body: () => Promise<void>): unknown;
  expect(actual: unknown, message?: string): ContractAssertion;
}

/** The matchers the contract uses, as vitest and jest spell them. */
export interface ContractAssertion {
  toEqual(expected: unknown): void;
  toThrow(expected?: unknown): void;
  toHaveLength(expected: number): void;
  toBe(expected: unknown): void;
  toBeUndefined(): void;
  toBeInstanceOf(expected: unknown): void;
  toMatchObject(expected: object): void;
  readonly rejects: ContractPromiseAssertion;
  readonly resolves: ContractPromiseAssertion;
}

/** {@link ContractAssertion} on a promise's outcome. */
export interface ContractPromiseAssertion {
  toBeUndefined(): PromiseLike<void>;
  toBeInstanceOf(expected: unknown): PromiseLike<void>;
  toMatchObject(expected: object): PromiseLike<void>;
  toThrow(expected: string): PromiseLike<void>;
}

/** A rune of stream `stream` at `seq`: a spawn at seq 1, a `tick` after. */
export const runeOf = (stream: string, seq: number, machine = 'counter'): Rune =>
  seq === 1
    ? { stream, seq, machine, kind: 'spawned', event: { type: 'spawn', input: { n: seq } }, to: 'idle', at: seq }
    : { stream, seq, machine, kind: 'tick', event: { type: 'tick', n: seq, text: `é✓ "quoted" ${seq}` }, from: 'idle', to: 'idle', at: seq * 10 };

/** `count` runes of `stream` from `from`. */
export const runesOf = (stream: string, from: number, count: number): Rune[] => Array.from({ length: count }, (_, i) => runeOf(stream, from + i));

/** What a store says it has beyond the required methods: the suite checks each one it claims. */
export interface StoreFeatures {
  /** `appendSync`: commits one rune at once. */
  readonly appendSync?: boolean;
  /** `tail` and `raiseFence`: a store several writers share. Without them, one writer by construction. */
  readonly severalWriters?: boolean;
  /** `restore`: takes back pruned runes (from their archive). */
  readonly restore?: boolean;
}
