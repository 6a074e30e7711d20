// Talks to the demo agent of a running `runestream serve` (`npm start`): sends one message,
// approves only the tools it trusts (and denies the rest), prints what the agent said, one line
// per model call, and exits when the turn is over.
//
//   npm start                                              # in one terminal
//   npm run example -- examples/demo-client.ts "note: buy milk"
//
// RUNESTREAM_URL says where the server is (ws://127.0.0.1:7070 by default).
import { randomUUID } from 'node:crypto';
import { filter, firstValueFrom, throwError, timeout } from 'rxjs';
import { WebSocket } from 'ws';
import { ClientError, createClient } from 'runestream/client';
import type { ToolCallState, TurnEngineState } from 'runestream';

const url = process.env.RUNESTREAM_URL ?? 'ws://127.0.0.1:7070';
const input = process.argv.slice(2).join(' ') || 'what time is it';
// The tools this program approves on the user's behalf; a real front end would ask a person.
const trusted = new Set(['save_note']);

const client = createClient({ url, WebSocket });
// A conversation of its own each run: spawning a stream that exists is refused (`stream_exists`).
const agent = `conv/${randomUUID()}/agent/me`;
const turnStream = `${agent}/turn`;

/** Answers one call that waits for approval. A call that needs none never asks, so is never answered. */
function decide(callId: string): void {
  const call = `${agent}/call/${callId}`;
  const waiting = client.state$<ToolCallState>(call).pipe(filter((state) => state.value === 'awaiting_approval'));
  // No value: the call ended (or the client closed) without asking.
  firstValueFrom(waiting, { defaultValue: undefined })
    .then((state) => {
      if (state === undefined) return;
      const event = trusted.has(state.toolName) ? { type: 'approved', approver: 'demo-client' } : { type: 'denied', reason: `${state.toolName} is not trusted` };
      console.log(`${event.type} ${state.toolName}`);
      return client.dispatch(call, event);
    })
    // Another client may have answered first (the call is then past approval): say so, go on.
    .catch((error: unknown) => console.error(`could not answer ${callId}: ${error instanceof ClientError ? error.code : String(error)}`));
}

// The client reconnects forever; a program that needs a server now gives up after a while.
const connected = firstValueFrom(
  client.connectionState$.pipe(
    filter((state) => state === 'OPEN' || state === 'SUBSCRIBED'),
    timeout({ first: 5_000, with: () => throwError(() => new Error(`no server at ${url} (start one with npm start)`)) }),
  ),
);

try {
  await Promise.all([connected, client.spawn(turnStream, 'turn-engine')]);
  const ended = firstValueFrom(client.runes$(turnStream).pipe(filter((rune) => ['turn.completed', 'turn.interrupted', 'turn.error'].includes(rune.kind))));
  client.runes$(turnStream).subscribe((rune) => {
    if (rune.kind === 'turn.tool_calls_received') for (const callId of rune.event.callIds as string[]) decide(callId);
  });
  await client.dispatch(turnStream, { type: 'start_turn', input });
  const end = await ended;
  const turn = await firstValueFrom(client.state$<TurnEngineState>(turnStream));
  // One message per model call: "Let me look at the clock." before the tool, the answer after it.
  for (const message of turn.messages ?? [turn.output]) if (message !== '') console.log(`assistant: ${message}`);
  console.log(end.kind);
} catch (error) {
  console.error(`demo-client: ${error instanceof ClientError ? `${error.code}: ${error.message}` : String(error)}`);
  process.exitCode = 1;
} finally {
  await client.close();
}
