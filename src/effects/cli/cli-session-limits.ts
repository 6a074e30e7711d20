import { z } from 'zod';
import { cliError } from './cli-errors.js';

/** Default of `maxRunningSessions`: agent CLI processes running at once in one server process. */
export const DEFAULT_MAX_RUNNING_SESSIONS = 16;
/** Default of `maxSessionsPerIdentity`: agent CLI processes one identity runs at once. */
export const DEFAULT_MAX_SESSIONS_PER_IDENTITY = 4;

/**
 * How many agent CLI processes may run at once: the one schema of `agentCliSessions`' options and
 * of `runestream serve`'s `cliSessions` configuration key.
 */
export const CliSessionLimits = z.strictObject({
  /**
   * CLI processes running at once, whoever started them (an interactive CLI's process counts
   * while it lives, across turns). A run past it is not started: its session gets `process_error`
   * `too_many_sessions:` naming the limit (so `error`, offered `retry`). Default 16.
   */
  maxRunningSessions: z.number().int().positive().max(10_000).optional(),
  /**
   * CLI processes running at once that one identity started (the verified identity whose
   * `start_session`, `send_message`, `resume_session` or `retry` started the run, as the server's
   * `onDrive` tells `owners`); past it, the same `too_many_sessions:`. Runs no client started
   * count only towards `maxRunningSessions`. Default 4.
   */
  maxSessionsPerIdentity: z.number().int().positive().max(10_000).optional(),
});
export type CliSessionLimits = z.infer<typeof CliSessionLimits>;

/** A slot taken: call to give it back when the process has ended. */
export type ReleaseSlot = () => void;

/**
 * The running CLI processes, counted in total and by identity: `take` gives a slot (or the
 * `too_many_sessions:` text that refuses one), its release gives it back.
 */
export function cliSessionSlots(limits: CliSessionLimits) {
  const { maxRunningSessions = DEFAULT_MAX_RUNNING_SESSIONS, maxSessionsPerIdentity = DEFAULT_MAX_SESSIONS_PER_IDENTITY } = limits;
  let running = 0;
  const byIdentity = new Map<string, number>();
  return {
    take(identity: string | undefined): ReleaseSlot | string {
      if (running >= maxRunningSessions) {
        return cliError(
          'too_many_sessions',
          `${running} agent CLI sessions run now, at most ${maxRunningSessions} at once (maxRunningSessions); no process was started: retry once one has ended`,
        );
      }
      const mine = identity === undefined ? 0 : (byIdentity.get(identity) ?? 0);
      if (identity !== undefined && mine >= maxSessionsPerIdentity) {
        return cliError(
          'too_many_sessions',
          `"${identity}" runs ${mine} agent CLI sessions now, at most ${maxSessionsPerIdentity} per identity (maxSessionsPerIdentity); no process was started: end one (cancel_session), then retry`,
        );
      }
      running++;
      if (identity !== undefined) byIdentity.set(identity, mine + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        running--;
        if (identity === undefined) return;
        const left = (byIdentity.get(identity) ?? 1) - 1;
        if (left === 0) byIdentity.delete(identity);
        else byIdentity.set(identity, left);
      };
    },
  };
}
