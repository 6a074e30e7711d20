import { Observable, type SchedulerLike } from 'rxjs';
import type { ToolCallEvent } from '../../reducers/tool-call/schema.js';
import { errorText } from '../../reducers/error-text.js';
import { toJsonOutput } from './json-output.js';
import { DEFAULT_MAX_TOOL_RESULT_BYTES, ToolResultTooLargeError } from './tool-result-limits.js';
import type { AnyTool } from './tool.js';

/** The abort reason of a tool whose call timed out. */
export class ToolTimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

/** The abort reason of a tool whose run was stopped: its call was cancelled, or the engine closed. */
export class ToolAbortError extends Error {
  override readonly name = 'AbortError';
}

/** The longest delay a JavaScript timer takes; longer ones fire at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One run of a tool, as the events it ends its call with. Nothing happens until it is subscribed;
 * each subscription runs the tool once.
 *
 * 1. Calls `tool.execute(input, {signal, progress})`. Each `progress(chunk)` emits
 *    `progress_update{chunk}` while the run is going; later ones are dropped.
 * 2. A value (or a promise of one) emits `success{output}` with the output as JSON (see
 *    `toJsonOutput`) and completes; a throw or a rejection emits `execution_error{error}`, and so
 *    does an output over `tool.maxResultBytes` (default 1,000,000): "tool result too large: ...".
 * 3. After `tool.timeoutMs` on `scheduler` (none for `Infinity`), it aborts the signal with a
 *    `TimeoutError`, emits `execution_timeout` and completes; whatever the tool does later is ignored.
 * 4. Unsubscribing before the end (the call was cancelled) aborts the signal with an `AbortError`
 *    whose message is `stopReason()`.
 *
 * ## Example
 * ```ts
 * import { asyncScheduler } from 'rxjs';
 * import { z } from 'zod';
 * import { defineTool, runTool } from 'runestream/agents';
 * const add = defineTool({ name: 'add', description: 'Adds.', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b });
 * runTool(add, { a: 1, b: 2 }, asyncScheduler).subscribe((event) => console.log(event));
 * // Logs: { type: 'success', output: 3 }
 * ```
 *
 * @see toolCallEffects, which runs it for every call that enters `executing`.
 */
export function runTool(tool: AnyTool, input: unknown, scheduler: SchedulerLike, stopReason = () => 'stopped'): Observable<ToolCallEvent> {
  return new Observable<ToolCallEvent>((subscriber) => {
    const controller = new AbortController();
    let settled = false;
    const end = (event: ToolCallEvent): void => {
      if (settled) return;
      settled = true;
      subscriber.next(event);
      subscriber.complete();
    };
    const timeout =
      Number.isFinite(tool.timeoutMs) && tool.timeoutMs <= MAX_TIMER_MS
        ? scheduler.schedule(() => {
            if (settled) return;
            controller.abort(new ToolTimeoutError(`tool "${tool.name}" timed out after ${tool.timeoutMs} ms`));
            end({ type: 'execution_timeout' });
          }, tool.timeoutMs)
        : undefined;
    const progress = (chunk: string): void => {
      if (!settled) subscriber.next({ type: 'progress_update', chunk: typeof chunk === 'string' ? chunk : String(chunk) });
    };
    const succeed = (value: unknown): void => {
      if (settled) return;
      let output;
      try {
        output = toJsonOutput(tool.name, value, tool.maxResultBytes ?? DEFAULT_MAX_TOOL_RESULT_BYTES);
      } catch (error) {
        return fail(error);
      }
      end({ type: 'success', output });
    };
    const fail = (error: unknown): void => end({ type: 'execution_error', error: outcomeErrorText(error) });
    try {
      const result = tool.execute(input, { signal: controller.signal, progress });
      if (isThenable(result)) result.then(succeed, fail);
      else succeed(result);
    } catch (error) {
      fail(error);
    }
    return () => {
      timeout?.unsubscribe();
      if (settled) return;
      settled = true;
      controller.abort(new ToolAbortError(`tool "${tool.name}": ${stopReason()}`));
    };
  });
}

/** A run's error as its `execution_error`: a refused result by its message alone (it names itself), any other by `errorText`. */
const outcomeErrorText = (error: unknown): string => (error instanceof ToolResultTooLargeError ? error.message : errorText(error));

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
