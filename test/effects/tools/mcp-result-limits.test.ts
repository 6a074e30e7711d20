import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants } from '../../../src/index.js';
import { createEngine, type Engine } from '../../../src/streams/engine.js';
import { memoryStore } from '../../../src/streams/memory-store.js';
import { connectMcp, toolCallEffects, type McpConnection } from '../../../src/agents.js';
import { outcomeOf } from './support.js';

/** Issue 26 item 4: an MCP answer past maxResultBytes, and a connection that drops, against a real server process (test/fixtures/mcp/server.ts). */

const server = fileURLToPath(new URL('../../fixtures/mcp/server.ts', import.meta.url));
const logFile = join(mkdtempSync(join(tmpdir(), 'runestream-mcp-limits-')), 'server.log');
const store = memoryStore();
let mcp: McpConnection;
let engine: Engine;

beforeAll(async () => {
  mcp = await connectMcp({ command: process.execPath, args: ['--import', 'tsx', server], env: { MCP_FIXTURE_LOG: logFile }, name: 'lim', maxResultBytes: 65_536 });
  engine = createEngine({ store, scheduler: new VirtualTimeScheduler(), epics: [toolCallEffects({ tools: mcp.tools })] });
});

afterAll(async () => {
  await engine?.close();
  await mcp?.close();
});

const call = (callId: string, toolName: string, args: Record<string, unknown>) => ({ callId, toolName, arguments: args });

describe('connectMcp: maxResultBytes', () => {
  it('an answer past it ends its call with execution_error naming the limit, read no further; the next call on the same connection succeeds', async () => {
    const client = mcp.client;
    // 12 MB: past the SDK's own 10 MiB read buffer too, which used to close the connection.
    await engine.spawn('big-1', 'tool-call', call('b1', 'lim__big', { bytes: 12_000_000 }));
    const refused = await outcomeOf(engine, 'big-1');
    expect(refused.to).toBe('error_result');
    expect(refused.event).toEqual({
      type: 'execution_error',
      error: expect.stringMatching(/^tool result too large: MCP tool "lim__big" returned 120000\d\d bytes, over 65536 \(maxResultBytes\)$/),
    });
    await engine.spawn('echo-1', 'tool-call', call('e1', 'lim__echo', { text: 'still here' }));
    expect((await outcomeOf(engine, 'echo-1')).event).toEqual({ type: 'success', output: 'still here' });
    expect(mcp.client).toBe(client); // the same connection: nothing was closed
    expect(checkInvariants(await store.read('big-1'))).toEqual([]);
  });

  it('a connection that drops ends its running call with an error saying so; the next call reconnects and succeeds', async () => {
    const client = mcp.client;
    await engine.spawn('crash-1', 'tool-call', call('c1', 'lim__crash', {}));
    const ended = await outcomeOf(engine, 'crash-1');
    expect(ended.to).toBe('error_result');
    expect(ended.event).toEqual({
      type: 'execution_error',
      error: expect.stringMatching(/^the MCP server's connection dropped during the call \(.*\); the next call reconnects$/),
    });
    await engine.spawn('echo-2', 'tool-call', call('e2', 'lim__echo', { text: 'after the crash' }));
    expect((await outcomeOf(engine, 'echo-2')).event).toEqual({ type: 'success', output: 'after the crash' });
    expect(mcp.client).not.toBe(client); // a new connection, to a new server process
    expect(readFileSync(logFile, 'utf8')).toContain('crash\n');
  });

  it('refuses a maxResultBytes that is not a positive integer or Infinity', async () => {
    await expect(connectMcp({ command: process.execPath, maxResultBytes: 0 })).rejects.toThrow('connectMcp: "maxResultBytes" must be a positive integer or Infinity, got 0');
  });
});
