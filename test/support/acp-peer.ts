import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { Subject } from 'rxjs';
import type { CliProcessIo } from '../../src/effects/cli/cli-adapter.js';
import { splitLines } from '../../src/streams/split-lines.js';

/** One line of a recorded ACP transcript (test/fixtures/cli/kilo-7.7.7/README.md). */
export type TranscriptEntry = { readonly from: 'client' | 'agent'; readonly message: Record<string, unknown> } | { readonly from: 'agent'; readonly line: string };

/** A recorded transcript of test/fixtures/cli/kilo-7.7.7, by file name without `.ndjson`. */
export function kiloTranscript(name: string): TranscriptEntry[] {
  const text = readFileSync(new URL(`../fixtures/cli/kilo-7.7.7/${name}.ndjson`, import.meta.url), 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as TranscriptEntry);
}

/** The scripted agent's side of one process. */
export interface ScriptedAcpAgent {
  readonly io: CliProcessIo;
  /** The client messages of the transcript not sent yet (empty once the adapter said all it should). */
  unsent(): readonly unknown[];
}

/**
 * Plays the agent's side of a transcript to an adapter and checks the adapter's side against it:
 * each agent message is sent once every client message recorded before it was written (so an
 * answer the agent waited for comes first), and each line the adapter writes must equal the next
 * recorded client message, else `lines$` fails naming both. The agent's output reaches the adapter
 * in `chunkBytes`-byte chunks through `splitLines`, so lines (and UTF-8 characters) are split
 * across chunks; `lines$` completes after the last agent message
 * (what the adapter should have written by then and did not is in `unsent()`).
 */
export function scriptedAcpAgent(entries: readonly TranscriptEntry[], options: { chunkBytes?: number } = {}): ScriptedAcpAgent {
  const { chunkBytes = 61 } = options;
  const chunks = new Subject<Uint8Array>();
  const clientIndexes = entries.flatMap((entry, index) => (entry.from === 'client' ? [index] : []));
  let clientCursor = 0;
  let agentCursor = 0;
  let closed = false;
  const nextClient = () => clientIndexes[clientCursor] ?? Number.POSITIVE_INFINITY;

  const advance = () => {
    if (closed) return;
    let out = '';
    while (agentCursor < entries.length) {
      const entry = entries[agentCursor] as TranscriptEntry;
      if (entry.from === 'client') {
        agentCursor++;
        continue;
      }
      if (nextClient() < agentCursor) break; // the agent waits for what the client had sent before this
      out += `${'line' in entry ? entry.line : JSON.stringify(entry.message)}\n`;
      agentCursor++;
    }
    const bytes = new TextEncoder().encode(out);
    for (let at = 0; at < bytes.length && !closed; at += chunkBytes) chunks.next(bytes.subarray(at, at + chunkBytes));
    if (agentCursor >= entries.length && !closed) {
      closed = true;
      chunks.complete();
    }
  };

  const io: CliProcessIo = {
    lines$: chunks.pipe(splitLines()),
    write(line) {
      if (closed) return;
      const expected = entries[nextClient()];
      const sent: unknown = JSON.parse(line);
      if (expected === undefined || !('message' in expected) || !isDeepStrictEqual(sent, expected.message)) {
        closed = true;
        chunks.error(new Error(`the adapter wrote ${line}\nwhere the transcript has ${JSON.stringify(expected ?? 'nothing more')}`));
        return;
      }
      clientCursor++;
      queueMicrotask(advance);
    },
    end() {},
  };
  queueMicrotask(advance);
  return { io, unsent: () => clientIndexes.slice(clientCursor).map((index) => (entries[index] as { message: unknown }).message) };
}
