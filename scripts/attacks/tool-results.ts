/**
 * Issue 26, item 4 (tools): an oversized tool result wedged the turn, and a 100 MB MCP answer
 * killed the connection for good.
 *
 * - `oversized-result`: an agent's model asks for three tools whose results pass the engine's
 *   limits (a 2 MB string, 200 levels, 5,000 keys); a client starts the turn over the WebSocket.
 * - `mcp-100mb`: a real MCP server (test/fixtures/mcp/server.ts) answers one call with 100 MB;
 *   then a normal call on the same server.
 * - `mcp-crash`: the MCP server process exits during a call; then a normal call.
 *
 * Every wait has a deadline.
 */
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom, timeout } from 'rxjs';
import { z } from 'zod';
import { agentEpics, connectMcp, defineTool, scriptedModel, toolCallEffects } from '../../src/agents.js';
import { agentStreams, createEngine, type Engine, type Rune, type ToolCallState, type TurnEngineState } from '../../src/index.js';
import { Client, mib, ms, peakRss, report, rss, serve, signed } from './kit.js';

const fixture = fileURLToPath(new URL('../../test/fixtures/mcp/server.ts', import.meta.url));
const TERMINAL = new Set(['denied', 'completed_result', 'error_result', 'timeout_result', 'cancelled_result']);

/** A call's outcome rune, or undefined after `deadlineMs`. */
const outcome = (engine: Engine, stream: string, deadlineMs: number): Promise<Rune | undefined> =>
  firstValueFrom(
    engine.runes$(stream).pipe(
      filter((rune) => TERMINAL.has(rune.to ?? '')),
      timeout({ first: deadlineMs, with: () => [undefined] }),
    ),
    { defaultValue: undefined },
  );

/** A call's outcome in words: its state and its error or output, cut. */
const described = (rune: Rune | undefined): string => {
  if (rune === undefined) return 'still executing';
  const event = rune.event as { type: string; error?: string; output?: unknown };
  const detail = event.error ?? JSON.stringify(event.output);
  return `${rune.to} (${String(detail).slice(0, 110)})`;
};

/** 4a. Three results past the engine's limits, in one turn started by a client. */
async function oversizedResult(): Promise<void> {
  let nested: unknown = 'bottom';
  for (let i = 0; i < 200; i++) nested = { a: nested };
  const tools = [
    defineTool({ name: 'big', description: 'A 2 MB string.', inputSchema: z.object({}), execute: () => 'x'.repeat(2_000_000) }),
    defineTool({ name: 'deep', description: '200 levels.', inputSchema: z.object({}), execute: () => nested }),
    defineTool({
      name: 'wide',
      description: '5,000 keys.',
      inputSchema: z.object({}),
      execute: () => Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i])),
    }),
  ];
  const model = scriptedModel([{ toolCalls: tools.map((tool) => ({ toolName: tool.name, input: {}, toolCallId: tool.name })) }, { text: 'Done.' }]);
  const engine = createEngine({ epics: agentEpics({ model, tools }) });
  const { server, stop } = await serve({}, engine);
  const a = agentStreams('conv/attack', 'a1');
  const client = await Client.open(server.url);
  const started = performance.now();
  client.send({ op: 'spawn', id: 1, stream: a.turn, machine: 'turn-engine' });
  await client.find((m) => m.id === 1);
  client.send({ op: 'dispatch', id: 2, stream: a.turn, event: { type: 'start_turn', input: 'fetch everything' } });
  const outcomes = await Promise.all(tools.map((tool) => outcome(engine, a.call(tool.name), 60_000)));
  const turn = await firstValueFrom(
    engine.state$<TurnEngineState>(a.turn).pipe(
      filter((s) => s.value === 'idle' && s.turn === 1),
      timeout({ first: 60_000, with: () => [undefined] }),
    ),
    { defaultValue: undefined },
  );
  const elapsed = performance.now() - started;
  const states = await Promise.all(tools.map(async (tool) => (await engine.snapshot<ToolCallState>(a.call(tool.name)))?.state.value));
  client.ws.close();
  await stop();
  report(
    '4a. tool results past the engine limits (2 MB string, 200 levels, 5,000 keys)',
    'refused at dispatch; the call stayed executing (the turn tool_executing) for over 4 minutes, the 60 s timeout never fired',
    `${states.join(', ')}; turn ${turn === undefined ? 'NOT completed within 60 s' : `completed in ${ms(elapsed)}`}:\n    ${outcomes.map(described).join('\n    ')}`,
    26,
  );
}

/** 4b. A 100 MB answer from a real MCP server, then a normal call to it. */
async function mcp100mb(): Promise<void> {
  const mcp = await connectMcp({ command: process.execPath, args: ['--import', 'tsx', fixture], name: 'fx', stderr: 'ignore' });
  const engine = createEngine({ epics: [toolCallEffects({ tools: mcp.tools })] });
  const { server, stop } = await serve({}, engine);
  const client = await Client.open(server.url);
  const before = await rss();
  const peak = peakRss();
  const started = performance.now();
  client.send({ op: 'spawn', id: 1, stream: 'big-1', machine: 'tool-call', input: { callId: 'b1', toolName: 'fx__big', arguments: { bytes: 100_000_000 } } });
  const big = await outcome(engine, 'big-1', 50_000);
  const elapsed = performance.now() - started;
  const peakBytes = peak();
  client.send({ op: 'spawn', id: 2, stream: 'echo-1', machine: 'tool-call', input: { callId: 'e1', toolName: 'fx__echo', arguments: { text: 'still here' } } });
  const echo = await outcome(engine, 'echo-1', 20_000);
  client.ws.close();
  await stop();
  await mcp.close();
  report(
    '4b. a 100 MB MCP tool result (maxResultBytes 1,000,000), then a normal call',
    'the 100 MB result killed the MCP connection; every later call failed `Not connected` until a restart',
    `${described(big)} after ${ms(elapsed)}, RSS peak ${signed(peakBytes - before)} (${mib(peakBytes)});\n    next call: ${described(echo)}`,
    26,
  );
}

/** 4c. The MCP server process exits during a call, then a normal call. */
async function mcpCrash(): Promise<void> {
  const mcp = await connectMcp({ command: process.execPath, args: ['--import', 'tsx', fixture], name: 'fx', stderr: 'ignore' });
  const engine = createEngine({ epics: [toolCallEffects({ tools: mcp.tools })] });
  await engine.spawn('crash-1', 'tool-call', { callId: 'c1', toolName: 'fx__crash', arguments: {} });
  const crashed = await outcome(engine, 'crash-1', 20_000);
  await engine.spawn('echo-2', 'tool-call', { callId: 'e2', toolName: 'fx__echo', arguments: { text: 'after the crash' } });
  const echo = await outcome(engine, 'echo-2', 20_000);
  await engine.close();
  await mcp.close();
  report(
    '4c. the MCP server exits during a call, then a normal call',
    'a dropped connection stayed dropped: later calls `Not connected` until a restart',
    `${described(crashed)};\n    next call: ${described(echo)}`,
    26,
  );
}

export const attacks: Record<string, () => Promise<void>> = {
  'oversized-result': oversizedResult,
  'mcp-100mb': mcp100mb,
  'mcp-crash': mcpCrash,
};
