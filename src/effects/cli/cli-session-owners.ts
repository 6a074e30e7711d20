/** The events that start a session's run (a new CLI process) where none is running. */
export const RUN_STARTING_EVENTS: ReadonlySet<string> = new Set(['start_session', 'send_message', 'resume_session', 'retry']);

/**
 * Who started each agent CLI session's run, as the server saw it: runes do not carry who sent
 * them, so the server tells this, for each client's dispatch, just before it reaches the engine;
 * `agentCliSessions` takes it when the run starts and counts `maxSessionsPerIdentity` by it.
 * `runestream serve` passes one to both (the server's `onDrive`, the epic's `owners`).
 */
export interface CliSessionOwners {
  /**
   * A client whose verified identity is `identity` sends `message` to its stream: a dispatch of a
   * run-starting event (`start_session`, `send_message`, `resume_session`, `retry`) is kept as
   * that stream's owner until its run starts; returns what to tell once the engine answered (a
   * refused one is forgotten at once), or `undefined` when nothing was kept.
   */
  driven(identity: { readonly id: string }, message: { readonly stream: string; readonly event?: { readonly type: string } }): ((accepted: boolean) => void) | undefined;
  /** The identity whose event starts `stream`'s run now (forgotten from here); `undefined` when no client's did. */
  take(stream: string): string | undefined;
}

/**
 * The owners of agent CLI sessions, kept from a client's run-starting dispatch until its run
 * starts (see {@link CliSessionOwners}): one entry per session with such a dispatch accepted and
 * its run not started yet, so what it holds is bounded by the sessions themselves.
 *
 * ## Example
 * ```ts
 * import { cliSessionOwners } from 'runestream/agents';
 * const owners = cliSessionOwners();
 * owners.driven({ id: 'ann' }, { stream: 's1', event: { type: 'approve_action' } }); // starts no run: not kept
 * const answered = owners.driven({ id: 'bob' }, { stream: 's1', event: { type: 'start_session' } });
 * answered?.(true);
 * console.log(owners.take('s1'), owners.take('s1'));
 * // Logs: bob undefined
 * ```
 */
export function cliSessionOwners(): CliSessionOwners {
  const owners = new Map<string, { readonly identity: string }>();
  return {
    driven(identity, message) {
      if (message.event === undefined || !RUN_STARTING_EVENTS.has(message.event.type)) return undefined;
      const entry = { identity: identity.id };
      owners.set(message.stream, entry);
      return (accepted) => {
        if (!accepted && owners.get(message.stream) === entry) owners.delete(message.stream);
      };
    },
    take(stream) {
      const entry = owners.get(stream);
      owners.delete(stream);
      return entry?.identity;
    },
  };
}
