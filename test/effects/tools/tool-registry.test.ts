import { filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEngine, type Engine, type ToolCallState } from '../../../src/index.js';
import { defineTool, toolCallEffects, toolRegistry, ToolNameClashError } from '../../../src/agents.js';

const add = defineTool({ name: 'add', description: 'Adds.', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b });
const otherAdd = defineTool({ name: 'add', description: 'Adds otherwise.', inputSchema: z.object({}), execute: () => 0 });

let engine: Engine | undefined;
afterEach(async () => {
  await engine?.close();
  engine = undefined;
});

/** Spawns a call of `add` on `stream` and resolves with its terminal state. */
async function callAdd(stream: string): Promise<ToolCallState> {
  const done = firstValueFrom(engine!.runes$().pipe(filter((rune) => rune.stream === stream && rune.kind === 'tool.result')));
  await engine!.spawn(stream, 'tool-call', { callId: stream, toolName: 'add', arguments: { a: 1, b: 2 } });
  await done;
  return (await engine!.snapshot<ToolCallState>(stream))!.state;
}

describe('toolRegistry: tools added while calls run', () => {
  it('a call finds a tool added after the effects started, not one removed; a different tool of a taken name is refused, naming it', async () => {
    const registry = toolRegistry('test', []);
    engine = createEngine({ epics: [toolCallEffects({ tools: registry })] });
    expect(await callAdd('call-1')).toMatchObject({ value: 'error_result', error: 'unknown tool "add"; the known tools are: none' });

    registry.add([add]);
    registry.add([add]); // shared by a second holder
    expect(await callAdd('call-2')).toMatchObject({ value: 'completed_result', output: 3 });
    expect(registry.clash([otherAdd])).toBe('a different tool is already named "add"; tool names must be unique');
    expect(() => registry.add([otherAdd])).toThrow(new ToolNameClashError('test: a different tool is already named "add"; tool names must be unique'));

    registry.remove([add]);
    expect(await callAdd('call-3')).toMatchObject({ value: 'completed_result', output: 3 }); // one holder left
    registry.remove([add]);
    expect(await callAdd('call-4')).toMatchObject({ value: 'error_result', error: expect.stringContaining('unknown tool "add"') });
  });
});
