import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariants, type RuneStore } from '../../../src/index.js';
import { createEngine, type Engine } from '../../../src/streams/engine.js';
import { memoryStore } from '../../../src/streams/memory-store.js';
import { connectMcp, toolCallEffects, toolSpecs, type McpConnection } from '../../../src/agents.js';
import { kinds, outcomeOf, runeOf } from './support.js';

/** A real MCP server in a child process (test/fixtures/mcp/server.ts), over stdio. */

const server = fileURLToPath(new URL('../../fixtures/mcp/server.ts', import.meta.url));
const logFile = join(mkdtempSync(join(tmpdir(), 'runestream-mcp-')), 'server.log');
let mcp: McpConnection;
let store: RuneStore;
let engine: Engine;

beforeAll(async () => {
  mcp = await connectMcp({ command: process.execPath, args: ['--import', 'tsx', server], env: { MCP_FIXTURE_LOG: logFile }, name: 'fx' });
  const kept = memoryStore();
  store = { ...kept, close: async () => {} };
  engine = createEngine({ store, scheduler: new VirtualTimeScheduler(), epics: [toolCallEffects({ tools: mcp.tools })] });
});

afterAll(async () => {
  await engine?.close();
  await mcp?.close();
});

const call = (callId: string, toolName: string, args: Record<string, unknown>) => ({ callId, toolName, arguments: args });

describe('connectMcp', () => {
  it("lists the server's tools, prefixed with its name, their JSON Schema straight through to the model", () => {
    expect(mcp.tools.map((t) => t.name)).toEqual(['fx__echo', 'fx__add', 'fx__slow', 'fx__fail', 'fx__big', 'fx__crash']);
    expect(toolSpecs(mcp.tools).fx__add).toEqual({
      description: 'Adds two numbers.',
      inputSchema: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: { a: { type: 'number' }, b: { type: 'number' } },
        required: ['a', 'b'],
      },
    });
  });

  it('a tool the server annotates readOnlyHint is parallel-safe, any other runs one at a time; the option decides otherwise', async () => {
    expect(mcp.tools.map((t) => [t.name, t.parallelSafe])).toEqual([
      ['fx__echo', false],
      ['fx__add', true], // annotations: { readOnlyHint: true }
      ['fx__slow', false],
      ['fx__fail', false],
      ['fx__big', false],
      ['fx__crash', false],
    ]);
    const chosen = await connectMcp({ command: process.execPath, args: ['--import', 'tsx', server], parallelSafe: (tool) => tool.name === 'echo', stderr: 'ignore' });
    try {
      expect(chosen.tools.filter((t) => t.parallelSafe).map((t) => t.name)).toEqual(['echo']);
    } finally {
      await chosen.close();
    }
  });

  it('checks arguments against the input schema here, naming each failing field', () => {
    const add = mcp.tools.find((t) => t.name === 'fx__add')!;
    expect(add.parseInput({ a: 1, b: 2 })).toEqual({ ok: true, input: { a: 1, b: 2 } });
    expect(add.parseInput({ a: 'one' })).toEqual({ ok: false, error: "(root): must have required property 'b'; a: must be number" });
    expect(add.parseInput([1, 2])).toEqual({ ok: false, error: '(root): MCP tool arguments must be a JSON object, got an array' });
  });

  it('runs a call through the engine: text content is the output, structured content wins over text', async () => {
    await engine.spawn('echo-1', 'tool-call', call('e1', 'fx__echo', { text: 'hello' }));
    await engine.spawn('add-1', 'tool-call', call('a1', 'fx__add', { a: 2, b: 40 }));
    expect((await outcomeOf(engine, 'echo-1')).event).toEqual({ type: 'success', output: 'hello' });
    expect((await outcomeOf(engine, 'add-1')).event).toEqual({ type: 'success', output: { sum: 42 } });
  });

  it("turns the server's progress notifications into progress_update runes", async () => {
    await engine.spawn('slow-1', 'tool-call', call('s1', 'fx__slow', { steps: 3, stepMs: 1 }));
    expect((await outcomeOf(engine, 'slow-1')).event).toEqual({ type: 'success', output: 'done after 3 steps' });
    const runes = await store.read('slow-1');
    expect(runes.filter((r) => r.kind === 'tool.progress').map((r) => r.event)).toEqual([
      { type: 'progress_update', chunk: 'step 1 of 3' },
      { type: 'progress_update', chunk: 'step 2 of 3' },
      { type: 'progress_update', chunk: 'step 3 of 3' },
    ]);
    expect(checkInvariants(runes)).toEqual([]);
  });

  it('a cancelled call sends notifications/cancelled: the server sees its signal abort, with the reason', async () => {
    await engine.spawn('slow-2', 'tool-call', call('s2', 'fx__slow', { steps: 10_000, stepMs: 5 }));
    await runeOf(engine, 'slow-2', (r) => r.kind === 'tool.progress');
    await engine.dispatch('slow-2', { type: 'cancelled', reason: 'user pressed stop' });
    expect((await outcomeOf(engine, 'slow-2')).to).toBe('cancelled_result');
    // A round trip on the same connection: the server handled the cancellation before this answer.
    await engine.spawn('echo-2', 'tool-call', call('e2', 'fx__echo', { text: 'after' }));
    await outcomeOf(engine, 'echo-2');
    expect(readFileSync(logFile, 'utf8')).toContain('slow cancelled: AbortError: tool "fx__slow": call cancelled: user pressed stop\n');
    const runes = await store.read('slow-2');
    expect(kinds(runes).at(-1)).toBe('tool.result:cancelled');
    expect(kinds(runes).filter((k) => k === 'tool.result:cancelled' || k.startsWith('tool.result'))).toHaveLength(1);
    expect(checkInvariants(runes)).toEqual([]);
  });

  it("an MCP error result (isError) ends the call with execution_error carrying the server's text", async () => {
    await engine.spawn('fail-1', 'tool-call', call('f1', 'fx__fail', { message: 'disk quota exceeded' }));
    expect((await outcomeOf(engine, 'fail-1')).event).toEqual({ type: 'execution_error', error: 'disk quota exceeded' });
  });

  it('arguments that fail the schema end the call before the server is asked', async () => {
    await engine.spawn('add-2', 'tool-call', call('a2', 'fx__add', { a: 1, b: 'two' }));
    expect((await outcomeOf(engine, 'add-2')).event).toEqual({ type: 'execution_error', error: 'invalid arguments for tool "fx__add": b: must be number' });
  });

  it('refuses a server that does not start, naming the command', async () => {
    await expect(connectMcp({ command: join(tmpdir(), 'no-such-mcp-server') })).rejects.toThrow(
      /^connectMcp: the MCP server ".*no-such-mcp-server" did not start or answer: .*ENOENT/,
    );
  });
});
