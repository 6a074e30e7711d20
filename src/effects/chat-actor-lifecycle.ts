import { EMPTY, Observable, defaultIfEmpty, defer, exhaustMap, map, merge, of, startWith, switchMap } from 'rxjs';
import { chatActor } from '../reducers/chat-actor/machine.js';
import type { ChatActorEvent } from '../reducers/chat-actor/schema.js';
import { durableDeadline } from '../streams/durable-deadline.js';
import { firedByTimer } from '../streams/fired-by-timer.js';
import { stateEffects } from '../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../streams/epic.js';
import { storedLastRune$, type EffectsByKey, type StreamView } from '../streams/state-effects.js';
import { ChatWork, chatOfActor, storedWork$ } from './chat-work.js';
import { INTERRUPTED_BY_RESTART } from './tool-call-recovery.js';

/** Options of {@link chatActorLifecycle}, with their defaults. */
export interface ChatActorLifecycleOptions {
  /**
   * Idle or paused this long, with no rune of its chat's work either (heard live, or stored
   * before a restart) and no call of the chat waiting for a person, an actor gets
   * `InactivityTimeout` (seed 000: 10 minutes). Default 600,000 ms.
   */
  inactivityTimeoutMs?: number;
  /**
   * Running this long without activity, an actor is seen stale: its interaction went silent, and it
   * gets one `Pause` with the reason "stale: no activity" (so the user can resume it and its
   * inactivity clock runs). Activity is any rune on the actor, a client's `Ping` included, and
   * any rune of its interaction's work (its chat `chat/<c>`: the agent, its turn's deltas and tool
   * rounds, its tool calls); each restarts the window. While a tool call of the chat waits for a
   * person (`awaiting_approval`) the actor is never seen stale: waiting for a person is not
   * silence. 0 turns it off. Default 600,000 ms.
   */
  staleAfterMs?: number;
  /** How late a timeout or a stale check may fire: the timer wheels' bucket size. Default 1,000 ms. */
  resolutionMs?: number;
}

const OPTIONS = ['inactivityTimeoutMs', 'staleAfterMs', 'resolutionMs'];

/** The reason of the `Pause` a running actor gets when it is seen stale. */
const STALE_NO_ACTIVITY = 'stale: no activity';

// The events its clocks dispatch, made once: an idle actor's armed deadline holds one.
const STALE_PAUSE = { type: 'Pause', reason: STALE_NO_ACTIVITY } as const;
const INACTIVITY_TIMEOUT = { type: 'InactivityTimeout' } as const;
const RESTART_PAUSE = { type: 'Pause', reason: INTERRUPTED_BY_RESTART } as const;

/**
 * The chat actor's lifecycle (seed 000) as an epic:
 *
 * 1. Inactivity: every accepted event of a chat actor in `idle` or `paused` (Ping included)
 *    restarts its clock, and so does each rune of its chat's work (as for the heartbeat below);
 *    after `inactivityTimeoutMs` without one, and with no call of the chat waiting for a person,
 *    it gets `InactivityTimeout` (and completes), in this process or one that found it in the
 *    store after a restart. While it is `running` no clock runs. Every clock is a `durableDeadline`
 *    on one shared timer wheel, held as data: a million idle actors are a million map entries and
 *    one scheduled action, no subscription. The chat's work is read from the store when the clock
 *    runs out (work since moves it on), not heard as it happens.
 * 2. Heartbeat (seed 000's heartbeat task), kept in memory: while this process owns a `running`
 *    actor, the epic holds its heartbeat as a deadline moved by each of the actor's runes and
 *    each rune of its chat's work (`chat/<c>`'s agent, turn and tool calls, whoever owns them),
 *    and appends nothing for it. An actor whose interaction goes `staleAfterMs` without one is
 *    seen stale and gets one `Pause` ("stale: no activity"), unless a tool call of its chat waits
 *    for a person's approval (then it is asked again a minute later, and the approval's end
 *    restarts the window); paused, its inactivity clock runs. So a running actor costs the log
 *    at most that one rune, however long it runs.
 * 3. Shutdown: a terminal state or `Shutdown` releases the actor from memory; its state stays in
 *    the log, and the next dispatch respawns it from there (seed 000 "Respawning").
 *
 * These are effects of each actor's state (see `stateEffects`), and the deadline is the last rune's
 * `at` plus the timeout, so it is kept in the log itself: after a restart the engine re-arms the
 * clock of every idle or paused chat actor in the store at its original deadline, from its head
 * alone, or fires it at once if that has passed (unless the actor's last rune is a `Shutdown`: a
 * shut-down actor has no clock). A clock that runs out reads its chat's work from the store (the
 * heads of `chat/<c>/...`) before it fires: work later than what it heard (done before a restart,
 * which this process never heard live) moves it on, and a call waiting for a person holds it; a
 * re-armed clock hears the chat's live work as any other. An actor left `running` by a crash (its
 * interaction died with the process) is paused, "interrupted by restart": the next interaction
 * resumes it, and meanwhile its clock runs.
 *
 * ## Example
 * ```ts
 * import { chatActorLifecycle, createEngine } from 'runestream';
 * const engine = createEngine({ epics: [chatActorLifecycle({ inactivityTimeoutMs: 5 * 60_000 })] });
 * await engine.spawn('chat-1', 'chat-actor'); // idle: times out after five quiet minutes
 * await engine.close();
 * ```
 */
export function chatActorLifecycle(options: ChatActorLifecycleOptions = {}): Epic {
  for (const key of Object.keys(options)) {
    if (!OPTIONS.includes(key)) throw new TypeError(`chatActorLifecycle: unknown option "${key}"; the options are ${OPTIONS.join(', ')}`);
  }
  const { inactivityTimeoutMs = 600_000, staleAfterMs = 600_000, resolutionMs = 1000 } = options;
  if (!(inactivityTimeoutMs > 0)) {
    throw new TypeError(`chatActorLifecycle: "inactivityTimeoutMs" must be positive, got ${String(inactivityTimeoutMs)}`);
  }
  if (!(staleAfterMs >= 0)) {
    throw new TypeError(`chatActorLifecycle: "staleAfterMs" must be 0 (off) or positive, got ${String(staleAfterMs)}`);
  }
  if (!(resolutionMs > 0)) {
    throw new TypeError(`chatActorLifecycle: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  }
  // A timeout or stale pause whose dispatch fails (a store error) is tried again this much later;
  // one that succeeds ends the clock or the heartbeat with its own rune.
  const retryMs = Math.min(inactivityTimeoutMs, 60_000);
  const clock = { resolutionMs, retryMs };

  /**
   * `event`, once the actor and its chat's work have been quiet for `ms`: after its last rune or
   * its chat's last work rune, heard live or, when the clock runs out, read from the store (work
   * done before a restart, which this process never heard), unless a call of the chat waits for a
   * person: a running actor's heartbeat (the stale `Pause`), which hears its chat's work live. An
   * actor outside the chat scheme has no work to hear: its own runes only, as a plain durable
   * deadline (data on the shared wheel).
   */
  const quietFor = <E extends ChatActorEvent>(view: StreamView<typeof chatActor>, context: EpicContext, work: ChatWork, ms: number, event: E): Observable<E | EpicCommand> => {
    const chat = chatOfActor(view.stream);
    const options = { scheduler: context.scheduler, ...clock };
    if (chat === undefined) return durableDeadline(view.at + ms, event, options);
    // Quiet since `at`: runs out `ms` later, then again from the store's last work if that is later.
    const quietSince = (at: number): Observable<EpicCommand> =>
      durableDeadline(at + ms, event, options).pipe(
        exhaustMap((due) =>
          storedWork$(chat, context).pipe(
            switchMap((stored) => (stored.lastAt > at ? quietSince(stored.lastAt) : stored.waitsForPerson ? EMPTY : of(due).pipe(firedByTimer(view.stream)))),
          ),
        ),
      );
    return work.of(chat).pipe(
      map((rune) => rune.at),
      startWith(view.at),
      switchMap(quietSince),
    );
  };

  /**
   * What an idle or paused actor's inactivity clock reads once it runs out (see
   * {@link durableDeadline}'s `holds$`), or `undefined` when there is nothing to read: a resumed
   * actor whose last rune (`lastSeq`) is a `Shutdown` has no clock; in the chat scheme, its chat's
   * work as the store has it (heard live before, or done before a restart alike) moves it to that
   * work's time plus the timeout, and a call waiting for a person asks again `retryMs` later.
   * Built from the few values it needs, read only when due: a million armed clocks hold no
   * subscription, and no view of their stream.
   */
  const idleClockHolds$ = (stream: string, at: number, lastSeq: number | undefined, context: EpicContext): Observable<boolean | number> | undefined => {
    const chat = chatOfActor(stream);
    if (chat === undefined && lastSeq === undefined) return undefined;
    return defer(() => {
      const quiet$ =
        chat === undefined
          ? of<boolean | number>(true)
          : storedWork$(chat, context).pipe(
              map((stored): boolean | number => {
                const until = Math.max(at, stored.lastAt) + inactivityTimeoutMs;
                if (until > context.scheduler.now()) return until;
                return stored.waitsForPerson ? context.scheduler.now() + retryMs : true;
              }),
            );
      if (lastSeq === undefined) return quiet$;
      return storedLastRune$(stream, lastSeq, context).pipe(
        defaultIfEmpty(undefined),
        switchMap((last) => (last?.kind === 'Shutdown' ? of(false) : quiet$)),
      );
    });
  };

  return function chatActorLifecycle(runes$, context, deps) {
    const work = new ChatWork();
    const lifecycle = stateEffects({
      name: 'chatActorLifecycle',
      machine: chatActor,
      states: ['idle', 'paused', 'running'],
      // Every rune of an actor (a Ping included) restarts its clock or its heartbeat.
      restartOn: () => true,
      effects: (view, context): EffectsByKey<typeof chatActor> => {
        if (view.rune?.kind === 'Shutdown') return { release: released(view.stream, context) };
        if (view.value === 'running') {
          // Its interaction died with the process that ran it: pause it, so the user can resume it.
          if (view.origin === 'resumed') return { interrupted: of(RESTART_PAUSE) };
          return staleAfterMs > 0 ? { heartbeat: quietFor(view, context, work, staleAfterMs, STALE_PAUSE) } : {};
        }
        // The chat's work (a turn a client started on the agent's stream, say) is no inactivity either.
        // Found in the store: its last rune, read only once the clock runs out, may be a Shutdown, and
        // a shut-down actor has no clock, here as in the process that shut it down. Otherwise it times
        // out as soon as that is read (or if it cannot be), and is retried like any deadline. The
        // reads are part of the deadline's data: a million armed clocks hold no subscription.
        const holds$ = idleClockHolds$(view.stream, view.at, view.rune === undefined ? view.seq : undefined, context);
        const options = { scheduler: context.scheduler, ...clock };
        return { inactivity: durableDeadline(view.at + inactivityTimeoutMs, INACTIVITY_TIMEOUT, holds$ === undefined ? options : { ...options, holds$ }) };
      },
    });
    // The chat's work is heard whoever owns its streams: all the runes, where processes share a log.
    return merge(work.follow(context.allRunes$ ?? runes$), lifecycle(runes$, context, deps));
  };
}

/** Releases a shut-down actor from memory; its state stays in the log, where the next dispatch respawns it from. */
const released = (stream: string, context: EpicContext): Observable<never> =>
  defer(() => {
    context.release(stream);
    return EMPTY;
  });
