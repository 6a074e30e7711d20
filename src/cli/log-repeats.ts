import type { Logger } from 'pino';
import { asyncScheduler, type SchedulerLike, type Subscription } from 'rxjs';

/** Default of {@link LogRepeatOptions.maxRepeats}: lines of one key written per window. */
export const DEFAULT_LOG_MAX_REPEATS = 10;
/** Default of {@link LogRepeatOptions.repeatWindowMs}: the window, 10 s. */
export const DEFAULT_LOG_REPEAT_WINDOW_MS = 10_000;

/** How often the serve log writes lines of one kind (`log.maxRepeats`, `log.repeatWindowMs`). */
export interface LogRepeatOptions {
  /** Lines of one key written in a window; the rest are counted, then summed up in one line. Default 10. */
  readonly maxRepeats?: number;
  /** The window, in ms, from the first line of a key. Default 10,000. */
  readonly repeatWindowMs?: number;
  /** The clock of the windows. Default rxjs `asyncScheduler` (a `VirtualTimeScheduler` in tests). */
  readonly scheduler?: SchedulerLike;
}

/** The levels the serve log writes at. */
export type LogLineLevel = 'debug' | 'info' | 'warn' | 'error';

/** A log that writes at most `maxRepeats` lines of one key a window (see {@link repeatLimitedLog}). */
export interface RepeatLimitedLog {
  /** Writes `msg` with `fields` at `level`, unless its key (`level` and `key`) passed `maxRepeats` in this window. */
  write(level: LogLineLevel, key: string, fields: Record<string, unknown>, msg: string): void;
  /** Writes the summary of every window still open, and stops their timers. */
  close(): void;
}

/** One key's window: how many lines came, and the last one not written. */
interface Window {
  readonly level: LogLineLevel;
  readonly key: string;
  readonly timer: Subscription;
  count: number;
  last?: string;
}

/**
 * Rate-limits repeated lines, so one thing going wrong over and over (a CLI printing thousands of
 * lines the session refuses, a failing epic) cannot fill the disk:
 * 1. A line's key is its level and `key` (what kind of line, from where: `command_rejected
 *    agentCliSessions`), never the text, which varies.
 * 2. The first line of a key opens its window of `repeatWindowMs` (on `scheduler`); the first
 *    `maxRepeats` lines of the window are written, the rest only counted.
 * 3. When the window ends, if any were held back, one line at the same level says how many,
 *    with the last of them: `"<key>" repeated K more times in 10000 ms (over log.maxRepeats 10);
 *    the last: <msg>`, with the fields `{key, repeated: K}`. The next line of the key opens a new window.
 * Lines of a level the logger does not write cost nothing and count for nothing.
 */
export function repeatLimitedLog(logger: Logger, options: LogRepeatOptions = {}): RepeatLimitedLog {
  const { maxRepeats = DEFAULT_LOG_MAX_REPEATS, repeatWindowMs = DEFAULT_LOG_REPEAT_WINDOW_MS, scheduler = asyncScheduler } = options;
  const windows = new Map<string, Window>();
  const end = (id: string): void => {
    const window = windows.get(id);
    if (window === undefined) return;
    windows.delete(id);
    window.timer.unsubscribe();
    const repeated = window.count - maxRepeats;
    if (repeated > 0) {
      logger[window.level](
        { key: window.key, repeated },
        `"${window.key}" repeated ${repeated} more times in ${repeatWindowMs} ms (over log.maxRepeats ${maxRepeats}); the last: ${window.last ?? ''}`,
      );
    }
  };
  return {
    write(level, key, fields, msg) {
      if (!logger.isLevelEnabled(level)) return;
      const id = `${level} ${key}`;
      let window = windows.get(id);
      if (window === undefined) {
        window = { level, key, count: 0, timer: scheduler.schedule(() => end(id), repeatWindowMs) };
        windows.set(id, window);
      }
      if (++window.count <= maxRepeats) logger[level](fields, msg);
      else window.last = msg;
    },
    close() {
      for (const id of [...windows.keys()]) end(id);
    },
  };
}
