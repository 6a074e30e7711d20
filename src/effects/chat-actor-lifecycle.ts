import { Observable, Subscription, defaultIfEmpty, take } from 'rxjs';
import { chatActor } from '../reducers/chat-actor/machine.js';
import type { Rune, RuneOf } from '../reducers/rune.js';
import type { Epic, EpicCommand } from '../streams/epic.js';
import { ofMachine } from '../streams/of-machine.js';
import { timerWheel } from '../streams/timer-wheel.js';
import { storedHeads } from './stored-heads.js';
import { INTERRUPTED_BY_RESTART } from './tool-call-recovery.js';

/** Options of {@link chatActorLifecycle}, with their defaults. */
export interface ChatActorLifecycleOptions {
  /** Idle or paused this long, an actor gets `InactivityTimeout` (seed 000: 10 minutes). Default 600,000 ms. */
  inactivityTimeoutMs?: number;
  /**
   * Running this long without a rune, an actor is seen stale: its interaction went silent, and it
   * gets one `Pause` with the reason "stale: no activity" (so the user can resume it and its
   * inactivity clock runs). Any rune on the actor, a client's `Ping` included, restarts the window.
   * 0 turns it off. Default 600,000 ms.
   */
  staleAfterMs?: number;
  /** How late a timeout or a stale check may fire: the timer wheels' bucket size. Default 1,000 ms. */
  resolutionMs?: number;
}

const OPTIONS = ['inactivityTimeoutMs', 'staleAfterMs', 'resolutionMs'];

/** The reason of the `Pause` a running actor gets when it is seen stale. */
const STALE_NO_ACTIVITY = 'stale: no activity';

/** States in which the inactivity clock runs: seed 000 takes `InactivityTimeout` only there. */
const CLOCKED = new Set(['idle', 'paused']);

/**
 * The chat actor's lifecycle (seed 000) as an epic:
 *
 * 1. Inactivity: every accepted event of a chat actor in `idle` or `paused` (Ping included)
 *    restarts its clock; after `inactivityTimeoutMs` without one, it gets `InactivityTimeout`
 *    (and completes). While it is `running` no clock runs. All clocks share one timer wheel: a
 *    million idle actors are a million map entries and one scheduled action.
 * 2. Heartbeat (seed 000's heartbeat task), kept in memory: while this process owns a `running`
 *    actor, the epic holds its heartbeat on a second timer wheel, one entry moved by each of the
 *    actor's runes, and appends nothing for it. An actor that goes `staleAfterMs` without a rune
 *    is seen stale and gets one `Pause` ("stale: no activity"); paused, its inactivity clock runs.
 *    So a running actor costs the log at most that one rune, however long it runs.
 * 3. Shutdown: a terminal state or `Shutdown` releases the actor from memory; its state stays in
 *    the log, and the next dispatch respawns it from there (seed 000 "Respawning").
 *
 * The deadline is the last rune's `at` plus the timeout, so it is kept in the log itself: when the
 * epic starts (after a restart, say) it arms the clock of every idle or paused chat actor in the
 * store at its original deadline, or fires it at once if that has passed (unless the actor's last
 * rune is a `Shutdown`: a shut-down actor has no clock). An actor left `running`
 * by a crash (its interaction died with the process) is paused, "interrupted by restart": the
 * next interaction resumes it, and meanwhile its clock runs.
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
  // Stored streams are resumed once per engine: a resubscription after a failure would find this
  // process's own running actors and take them for leftovers of a crash. Clocks armed by live
  // runes after that start again as those actors get runes.
  let resumed = false;
  return function chatActorLifecycle(runes$, context) {
    const resume = !resumed;
    resumed = true;
    return new Observable<EpicCommand>((subscriber) => {
      const { scheduler } = context;
      const subscription = new Subscription();
      const timeOut = (stream: string): void => subscriber.next({ stream, event: { type: 'InactivityTimeout' } });
      /**
       * Idle or paused streams armed from the store, by the seq of their last rune: which may be a
       * `Shutdown`, and a shut-down actor has no clock, here as in the process that shut it down.
       * Only the head is listed, so that rune is read when the clock runs out, if no rune came since.
       */
      const armedFromStore = new Map<string, number>();
      const checking = new Set<string>();
      const clocks = timerWheel<string>(scheduler, resolutionMs, (due) => {
        for (const stream of due) {
          clocks.set(stream, scheduler.now() + retryMs);
          if (checking.has(stream)) continue; // its last rune is still being read
          const seq = armedFromStore.get(stream);
          if (seq === undefined) {
            timeOut(stream);
            continue;
          }
          armedFromStore.delete(stream);
          checking.add(stream);
          const decide = (last: Rune | undefined): void => {
            if (!checking.delete(stream)) return; // a rune came meanwhile: its own clock runs
            if (last?.kind === 'Shutdown') clocks.delete(stream);
            else timeOut(stream);
          };
          subscription.add(context.read(stream, seq - 1).pipe(take(1), defaultIfEmpty(undefined)).subscribe({ next: decide, error: () => decide(undefined) }));
        }
      });
      // Each running actor's heartbeat is its stale deadline; any rune of the actor moves it.
      const heartbeats = timerWheel<string>(scheduler, resolutionMs, (due) => {
        for (const stream of due) {
          heartbeats.set(stream, scheduler.now() + retryMs);
          subscriber.next({ stream, event: { type: 'Pause', reason: STALE_NO_ACTIVITY } });
        }
      });
      const onRune = (rune: RuneOf<typeof chatActor>): void => {
        armedFromStore.delete(rune.stream);
        checking.delete(rune.stream);
        const to = rune.to ?? '';
        if (to === 'running' && rune.kind !== 'Shutdown' && staleAfterMs > 0) heartbeats.set(rune.stream, rune.at + staleAfterMs);
        else heartbeats.delete(rune.stream);
        if (chatActor.terminal.includes(to) || rune.kind === 'Shutdown') {
          clocks.delete(rune.stream);
          context.release(rune.stream);
        } else if (CLOCKED.has(to)) {
          clocks.set(rune.stream, rune.at + inactivityTimeoutMs);
        } else {
          clocks.delete(rune.stream);
        }
      };
      const stop = (): void => {
        clocks.dispose();
        heartbeats.dispose();
      };
      const actors$ = runes$.pipe(ofMachine(chatActor));
      subscription.add(actors$.subscribe(onRune));
      // Durable clocks: an idle or paused actor in the store keeps its deadline across a restart
      // (its last rune's `at` plus the timeout), firing at once if that has passed.
      if (resume) {
        const interrupted = (stream: string): EpicCommand => ({ stream, event: { type: 'Pause', reason: INTERRUPTED_BY_RESTART } });
        subscription.add(
          storedHeads(actors$, context, { machine: chatActor.id, values: [...CLOCKED, 'running'] }, {
            // A rune that leaves running as it was (a client's Ping, say) on an actor running before
            // this process started: its interaction died with the old process, and the listing skips
            // it as heard live. Pause it here. (This process's own running actors are first heard
            // entering running, and its heartbeats append nothing, so they never match.)
            firstLive: (rune) => {
              if (rune.from === 'running' && rune.to === 'running' && rune.kind !== 'Shutdown') subscriber.next(interrupted(rune.stream));
            },
          }).subscribe((head) => {
            // Its interaction died with the process: pause it, so the user can resume it.
            if (head.value === 'running') {
              subscriber.next(interrupted(head.stream));
            } else {
              clocks.set(head.stream, head.at + inactivityTimeoutMs);
              armedFromStore.set(head.stream, head.seq);
            }
          }),
        );
      }
      return () => {
        subscription.unsubscribe();
        stop();
      };
    });
  };
}
