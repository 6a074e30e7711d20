import { Observable } from 'rxjs';
import type { toolCall } from '../../reducers/tool-call/machine.js';
import type { RuneOf } from '../../reducers/rune.js';
import type { EpicCommand, EpicContext } from '../../streams/epic.js';
import { timerWheel } from '../../streams/timer-wheel.js';
import { storedCalls } from './stored-calls.js';

/** Options of {@link toolApprovalTimeout}. */
export interface ToolApprovalTimeoutOptions {
  /** How long a call may wait for approval, in scheduler ms. */
  readonly approvalTimeoutMs: number;
  /** How late a timeout may fire: the timer wheel's bucket size, in ms. */
  readonly resolutionMs: number;
  /** List the stored calls `awaiting_approval` and arm their clocks at their original deadlines. */
  readonly resume: boolean;
}

/**
 * The approval clock of the tool-call effects: a call `awaiting_approval` for `approvalTimeoutMs`
 * gets `approval_timeout` (its `tool.result`, status timeout).
 *
 * 1. The deadline is the `at` of the rune that entered `awaiting_approval` plus the timeout: it is
 *    in the log, so it survives restarts. With `resume`, every stored call still awaiting approval
 *    is armed at its original deadline, or fires at once if that has passed; the approval itself
 *    waits in the log, and an `approved` after the restart runs the tool.
 * 2. Any rune that takes the call out of `awaiting_approval` (approved, denied, cancelled)
 *    disarms it. All clocks share one timer wheel (one scheduled action).
 * 3. A timeout whose rune does not come back (its dispatch failed) is sent again a minute later
 *    (or one timeout later, if that is shorter).
 *
 * @param calls$ the live runes of `tool-call` streams.
 */
export function toolApprovalTimeout(calls$: Observable<RuneOf<typeof toolCall>>, context: EpicContext, options: ToolApprovalTimeoutOptions): Observable<EpicCommand> {
  const { approvalTimeoutMs, resolutionMs, resume } = options;
  const retryMs = Math.min(approvalTimeoutMs, 60_000);
  return new Observable<EpicCommand>((subscriber) => {
    const { scheduler } = context;
    const clocks = timerWheel<string>(scheduler, resolutionMs, (due) => {
      for (const stream of due) {
        clocks.set(stream, scheduler.now() + retryMs);
        subscriber.next({ stream, event: { type: 'approval_timeout' } });
      }
    });
    const subscription = calls$.subscribe((rune) => {
      if (rune.to === 'awaiting_approval') clocks.set(rune.stream, rune.at + approvalTimeoutMs);
      else clocks.delete(rune.stream);
    });
    if (resume) {
      // The head's `at` is the rune that entered awaiting_approval: nothing loops there.
      subscription.add(storedCalls(calls$, context, ['awaiting_approval']).subscribe((head) => clocks.set(head.stream, head.at + approvalTimeoutMs)));
    }
    return () => {
      subscription.unsubscribe();
      clocks.dispose();
    };
  });
}
