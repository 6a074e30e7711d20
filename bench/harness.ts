import { performance } from 'node:perf_hooks';

export interface Rate {
  name: string;
  /** Operations per second. */
  rate: number;
  ops: number;
  ms: number;
}

/**
 * Runs `batch` (which performs `opsPerBatch` operations) after a warm-up until `minMs` have
 * passed, and returns the rate. Rates of a candidate and its anchor are measured in the same
 * process run, alternately, so a noisy machine slows both.
 */
export function measure(name: string, opsPerBatch: number, batch: () => void, minMs = 1000): Rate {
  for (let i = 0; i < 5; i++) batch();
  let ops = 0;
  const start = performance.now();
  let now = start;
  while (now - start < minMs) {
    batch();
    ops += opsPerBatch;
    now = performance.now();
  }
  const ms = now - start;
  return { name, rate: (ops / ms) * 1000, ops, ms };
}

/** Measures the two alternately `rounds` times and keeps each one's best rate. */
export function compare(rounds: number, a: () => Rate, b: () => Rate): [Rate, Rate] {
  let bestA: Rate | undefined;
  let bestB: Rate | undefined;
  for (let i = 0; i < rounds; i++) {
    const ra = a();
    const rb = b();
    if (!bestA || ra.rate > bestA.rate) bestA = ra;
    if (!bestB || rb.rate > bestB.rate) bestB = rb;
  }
  return [bestA!, bestB!];
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** Prints both rates, the ratio and whether it meets the bar; returns whether it does. */
export function report(title: string, candidate: Rate, anchor: Rate, bar: number): boolean {
  const ratio = candidate.rate / anchor.rate;
  const ok = ratio >= bar;
  console.log(`\n${title}`);
  console.log(`  ${candidate.name.padEnd(44)} ${fmt(candidate.rate).padStart(14)} ops/s`);
  console.log(`  ${anchor.name.padEnd(44)} ${fmt(anchor.rate).padStart(14)} ops/s`);
  console.log(`  ratio ${ratio.toFixed(1)}x (bar: >= ${bar}x)  ${ok ? 'PASS' : 'FAIL'}`);
  return ok;
}

/**
 * `measure` for a batch that completes asynchronously (an engine's dispatches resolving once
 * durable): awaits each batch before timing the next. Same warm-up and stopping rule.
 */
export async function measureAsync(name: string, opsPerBatch: number, batch: () => Promise<void>, minMs = 1000): Promise<Rate> {
  for (let i = 0; i < 5; i++) await batch();
  let ops = 0;
  const start = performance.now();
  let now = start;
  while (now - start < minMs) {
    await batch();
    ops += opsPerBatch;
    now = performance.now();
  }
  const ms = now - start;
  return { name, rate: (ops / ms) * 1000, ops, ms };
}

/** {@link compare} for asynchronous measurements: alternately `rounds` times, each one's best rate. */
export async function compareAsync(rounds: number, a: () => Promise<Rate>, b: () => Promise<Rate>): Promise<[Rate, Rate]> {
  let bestA: Rate | undefined;
  let bestB: Rate | undefined;
  for (let i = 0; i < rounds; i++) {
    const ra = await a();
    const rb = await b();
    if (!bestA || ra.rate > bestA.rate) bestA = ra;
    if (!bestB || rb.rate > bestB.rate) bestB = rb;
  }
  return [bestA!, bestB!];
}

/** The `p`-th percentile of ascending `sorted` (nearest rank). */
export const percentile = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;

/** `promise`, or a rejection naming `what` once it has taken `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, stalled]);
  } finally {
    clearTimeout(timer);
  }
}
