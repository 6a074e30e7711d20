import { z } from 'zod';
import { defineTool, type AnyTool } from '../src/effects/tools/tool.js';
import type { SimClock } from './clock.js';
import type { Random } from './random.js';

/**
 * The simulation's tools. Each counts its own executions by the nonce the model put in the call's
 * arguments (`text`), so the side-effect oracle reads the tools' books, never the log's word.
 */

/** A tool's books: executions started per nonce. */
export type ExecutionBook = Map<string, number>;

export interface FakeTools {
  readonly tools: readonly AnyTool[];
  /** Executions per tool name, then per nonce. */
  readonly executions: ReadonlyMap<string, ExecutionBook>;
  /** Which tools may run again after a crash (`rerunSafe`). */
  readonly rerunSafe: ReadonlySet<string>;
  /** Bumped by every execution step: the clock's settle waits while it moves. */
  readonly activity: () => number;
  /** Tools whose every call runs its side effect twice: a defect a test plants. */
  readonly runTwice: Set<string>;
}

const Input = z.object({ text: z.string().max(64), steps: z.number().int().min(0).max(5) });

/** Tools that need approval, run long, report progress, time out, fail, and run in parallel. */
export function fakeTools(random: Random, clock: SimClock): FakeTools {
  const executions = new Map<string, ExecutionBook>();
  const runTwice = new Set<string>();
  let activity = 0;
  const count = (tool: string, nonce: string): void => {
    activity++;
    let book = executions.get(tool);
    if (book === undefined) executions.set(tool, (book = new Map()));
    book.set(nonce, (book.get(nonce) ?? 0) + 1);
  };
  /** Waits `ms` of virtual time, or rejects when the call's signal aborts. */
  const wait = (ms: number, signal: AbortSignal): Promise<void> =>
    new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const action = clock.scheduler.schedule(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = (): void => {
        action.unsubscribe();
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  /** A tool that takes `steps` steps of a drawn length, reporting progress after each. */
  const stepping = (
    name: string,
    options: { needsApproval?: boolean; rerunSafe?: boolean; parallelSafe?: boolean; timeoutMs?: number; failRate?: number; stepMs: [number, number] },
  ) =>
    defineTool({
      name,
      description: `The simulation's ${name} tool.`,
      inputSchema: Input,
      needsApproval: options.needsApproval ?? false,
      rerunSafe: options.rerunSafe ?? false,
      parallelSafe: options.parallelSafe ?? false,
      timeoutMs: options.timeoutMs ?? 60_000,
      execute: async ({ text, steps }, { signal, progress }) => {
        count(name, text);
        if (runTwice.has(name)) count(name, text);
        for (let step = 1; step <= steps; step++) {
          await wait(random.int(...options.stepMs), signal);
          activity++;
          progress(`${name} step ${step} of ${steps}`);
        }
        if (random.chance(options.failRate ?? 0)) throw new Error(`${name} failed on ${text}`);
        return { done: text };
      },
    });
  const tools = [
    stepping('note', { needsApproval: true, stepMs: [0, 100] }),
    stepping('lookup', { rerunSafe: true, parallelSafe: true, stepMs: [10, 2_000], failRate: 0.1 }),
    stepping('job', { timeoutMs: 30_000, stepMs: [1_000, 20_000], failRate: 0.1 }),
  ];
  return { tools, executions, rerunSafe: new Set(['lookup']), activity: () => activity, runTwice };
}
