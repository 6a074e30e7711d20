import { Observable, catchError, defer, ignoreElements, of, reduce, tap } from 'rxjs';
import type { Rune } from '../reducers/rune.js';
import { parseStreamId } from '../reducers/stream-ids.js';
import { toolCall } from '../reducers/tool-call/machine.js';
import type { EpicContext } from '../streams/epic.js';
import { KeyedListeners } from '../streams/keyed-listeners.js';

/**
 * The work of a chat's actors: whatever the chat's interactions make happen, outside the actors
 * themselves. A chat actor (`chat/<c>/actor/<n>`) drives its chat's conversation `chat/<c>`, whose
 * agent answers it with turns and tool calls (`chat/<c>/agent/<a>/...`, see `chatTalk`): a rune
 * on any of those streams is the actor's interaction at work.
 */

/** The chat (`chat/<c>`) of a chat actor's stream `chat/<c>/actor/<n>`, or `undefined` for a stream outside the scheme. */
export const chatOfActor = (stream: string): string | undefined => {
  const parts = parseStreamId(stream);
  return parts?.kind === 'actor' ? parts.root : undefined;
};

/** The chat whose work `stream` is (any stream of `chat/<c>` but its actors), or `undefined`. */
export const chatOfWork = (stream: string): string | undefined => {
  if (!stream.startsWith('chat/')) return undefined;
  const parts = parseStreamId(stream);
  return parts === undefined || parts.kind === 'actor' ? undefined : parts.root;
};

/**
 * The live runes of chats' work, by chat: one pass over the runes, one listener list per chat
 * watched (a running actor's), so a rune costs a prefix check however many chats run.
 */
export class ChatWork {
  readonly #listeners = new KeyedListeners<Rune>();

  /** Hands each rune of `runes$` to the watchers of its chat; emits nothing. */
  follow(runes$: Observable<Rune>): Observable<never> {
    return runes$.pipe(
      tap((rune) => {
        const chat = chatOfWork(rune.stream);
        if (chat !== undefined) this.#listeners.next(chat, rune);
      }),
      ignoreElements(),
    );
  }

  /** The live work runes of `chat`, from when it is subscribed. Never completes on its own. */
  of(chat: string): Observable<Rune> {
    return new Observable<Rune>((subscriber) => this.#listeners.add(chat, { next: (rune) => subscriber.next(rune), complete: () => subscriber.complete() }));
  }
}

/** What the store says of a chat's work: see {@link storedWork$}. */
export interface StoredWork {
  /** Whether a tool call of the chat waits for a person (is `awaiting_approval`). */
  readonly waitsForPerson: boolean;
  /** When the chat's work last changed (its newest stream head's `at`); `-Infinity` with none. */
  readonly lastAt: number;
}

const NO_WORK: StoredWork = { waitsForPerson: false, lastAt: Number.NEGATIVE_INFINITY };
/** What a listing that failed counts as: a person waiting, so the caller asks again later rather than take work it could not see for silence. */
const UNSEEN_WORK: StoredWork = { waitsForPerson: true, lastAt: Number.NEGATIVE_INFINITY };

/**
 * The work of `chat` as the store has it (the heads of its streams but its actors), then completes:
 * what a clock of its actor checks when it runs out. The store, not only the live runes, since a
 * process started after a crash never heard the work done before it; and a call waiting for a
 * person is no silence however long it waits.
 */
export const storedWork$ = (chat: string, context: EpicContext): Observable<StoredWork> =>
  defer(() => context.streams({ prefix: `${chat}/` })).pipe(
    reduce(
      (work, head) =>
        chatOfWork(head.stream) !== chat
          ? work
          : {
              waitsForPerson: work.waitsForPerson || (head.machine === toolCall.id && head.value === 'awaiting_approval'),
              lastAt: Math.max(work.lastAt, head.at),
            },
      NO_WORK,
    ),
    catchError(() => of(UNSEEN_WORK)),
  );
