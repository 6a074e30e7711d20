import { filter, firstValueFrom, lastValueFrom, map, scan, take } from 'rxjs';
import { chatActor } from '../reducers/chat-actor/machine.js';
import { isRuneOf, type Rune } from '../reducers/rune.js';
import { turnEndingOf, turnEngine } from '../reducers/turn-engine/machine.js';
import type { Engine } from '../streams/engine.js';
import { ofMachine } from '../streams/of-machine.js';
import { chatAgentOfActor, type ChatTalkOptions } from './chat-talk.js';

type Reader = Pick<Engine, 'runes$' | 'snapshot'>;

/** The `at` of a stream's rune `seq`, read alone. */
const atOf = (engine: Reader, stream: string, seq: number): Promise<number> => firstValueFrom(engine.runes$(stream, { afterSeq: seq - 1 }).pipe(map((rune) => rune.at)));

/** The first seq of `stream` (up to `headSeq`) whose rune is at `at` or later, by binary search: O(log n) reads. */
async function firstSeqAtOrAfter(engine: Reader, stream: string, headSeq: number, at: number): Promise<number> {
  let low = 1;
  let high = headSeq + 1; // past the head: nothing stored is that late yet
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if ((await atOf(engine, stream, mid)) >= at) high = mid;
    else low = mid + 1;
  }
  return low;
}

/** Where the search through a turn stream is: looking for the interaction's turn, inside it, or done. */
type Search = { readonly phase: 'seeking' | 'inside' | 'done'; readonly text: string };

/**
 * The text a chat's agent streamed for an actor's interaction before the actor stopped: what
 * seed 000's SSE `stopped` event carries as `partial_response`. Give it to `createServer({
 * partialResponse })` (`runestream serve` does).
 *
 * For a rune that took a chat actor (`chat/<c>/actor/<n>`) from `running` to a terminal state, it
 * finds the turn the actor's last interaction started (the chat agent's first `start_turn` with
 * its message at or after it) and resolves with that turn's text once the turn has ended (it
 * ends at its next safe boundary: `chatTalk` interrupts it). Durable, so a client that resumes
 * from an earlier `Last-Event-ID` months later gets the same text. `''` for any other rune, and
 * when no turn ran for the interaction. Reads O(log n) runes of the turn stream to find the turn,
 * then that turn's runes.
 */
export function chatPartialResponse(engine: Reader, options: ChatTalkOptions = {}): (rune: Rune) => Promise<string> {
  const agentId = options.agentId ?? 'assistant';
  return async (stopped) => {
    const agent = chatAgentOfActor(stopped.stream, agentId);
    if (agent === undefined || !isRuneOf(chatActor, stopped) || stopped.from !== 'running') return '';
    const started = await lastValueFrom(
      engine.runes$(stopped.stream).pipe(
        take(stopped.seq - 1),
        ofMachine(chatActor),
        scan((last: Rune | undefined, rune) => (rune.to === 'running' && rune.event.type === 'ProcessInteraction' ? rune : last), undefined),
      ),
      { defaultValue: undefined },
    );
    const interaction = started?.event;
    if (started === undefined || interaction?.type !== 'ProcessInteraction' || interaction.message === undefined) return '';
    const message = interaction.message;
    const head = await engine.snapshot(agent.turn);
    if (head === undefined) return '';
    const from = await firstSeqAtOrAfter(engine, agent.turn, head.seq, started.at);
    if (from > head.seq) return '';
    const search = engine.runes$(agent.turn, { afterSeq: from - 1 }).pipe(
      ofMachine(turnEngine),
      scan(
        (search: Search, rune): Search => {
          const { event } = rune;
          if (search.phase === 'seeking') {
            if (event.type === 'start_turn' && event.input === message) return { phase: 'inside', text: '' };
            // Not stored when the search began, and not found before it: no turn ran for the interaction.
            return rune.seq >= head.seq ? { phase: 'done', text: '' } : search;
          }
          const text = event.type === 'assistant_delta' ? search.text + event.content : search.text;
          return { phase: turnEndingOf(rune) !== undefined ? 'done' : 'inside', text };
        },
        { phase: 'seeking', text: '' },
      ),
      filter((search) => search.phase === 'done'),
      map((search) => search.text),
    );
    return firstValueFrom(search, { defaultValue: '' });
  };
}
