import { VirtualTimeScheduler, filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../../src/agents.js';
import {
  agentStreams,
  checkInvariants,
  createEngine,
  memoryStore,
  type Engine,
  type EngineError,
  type RuneStore,
  type ToolCallState,
  type TurnEngineState,
} from '../../../src/index.js';
import { storeLog } from '../../support/store-log.js';

/** Issue 26 item 4: a tool result the engine cannot store ends its call with an error the model hears, and the turn goes on. */

const a = agentStreams('conv/c1', 'a1');
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

/** A value nested `levels` deep: `{ a: { a: ... } }`. */
const nested = (levels: number): unknown => {
  let value: unknown = 'bottom';
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
};

/** Tools whose results are past the engine's limits (the defaults: 64 levels, 1,000 keys) or a tool's maxResultBytes (1,000,000 bytes). */
const oversized = [
  defineTool({ name: 'big', description: 'A 2 MB string.', inputSchema: z.object({}), execute: () => 'x'.repeat(2_000_000) }),
  defineTool({ name: 'deep', description: '200 levels.', inputSchema: z.object({}), execute: () => nested(200) }),
  defineTool({ name: 'wide', description: '5,000 keys.', inputSchema: z.object({}), execute: () => Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i])) }),
  defineTool({ name: 'long', description: 'A string past a small engine limit.', inputSchema: z.object({}), execute: () => 'y'.repeat(5000) }),
];

const turnDone = (engine: Engine, turn = 1) => firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === turn)));
const callState = async (engine: Engine, callId: string) => (await engine.snapshot<ToolCallState>(a.call(callId)))!.state;

describe('agentEpics: a tool result past the limits', () => {
  it('ends each call with error_result naming the limit it passed; the model hears it and the turn completes', async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { toolName: 'big', input: {}, toolCallId: 'big' },
          { toolName: 'deep', input: {}, toolCallId: 'deep' },
          { toolName: 'wide', input: {}, toolCallId: 'wide' },
          { toolName: 'long', input: {}, toolCallId: 'long' },
        ],
      },
      { text: 'Those results were too large.' },
    ]);
    const store = memoryStore();
    const engine = createEngine({ store, limits: { maxStringLength: 4000 }, epics: agentEpics({ model, tools: oversized }) });
    engines.push(engine);
    const errors: EngineError[] = [];
    engine.errors$.subscribe((error) => errors.push(error));
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'fetch everything' });

    const turn = await turnDone(engine);
    expect(turn.output).toBe('Those results were too large.');
    const outcomes = await Promise.all(['big', 'deep', 'wide', 'long'].map((id) => callState(engine, id)));
    expect(outcomes.map((call) => [call.value, call.error])).toEqual([
      ['error_result', 'tool result too large: tool "big" returned 2000000 bytes, over 1000000 (maxResultBytes)'],
      ['error_result', expect.stringMatching(/^tool result too large: event\.output\.a\.a.*: nested deeper than 64 levels \(limits\.maxDepth\)$/)],
      ['error_result', 'tool result too large: event.output: more than 1000 keys (limits.maxKeys)'],
      ['error_result', 'tool result too large: event.output: a string of 5000 characters is over 4000 (limits.maxStringLength)'],
    ]);
    // The second model call was given each refusal as its call's result.
    const prompt = JSON.stringify(model.doStreamCalls[1]!.prompt);
    expect(prompt).toContain('(maxResultBytes)');
    expect(prompt).toContain('(limits.maxKeys)');
    expect(errors).toEqual([]); // no dispatch was refused
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });
});

/** A store that fails every batch holding a tool's `success` (the disk filled up as it came). */
function storeFailingSuccesses(inner: RuneStore = memoryStore()): RuneStore {
  return {
    ...inner,
    appendSync: undefined,
    append: async (runes, options) => {
      if (runes.some((rune) => rune.machine === 'tool-call' && rune.event.type === 'success')) throw new Error('disk full');
      await inner.append(runes, options);
    },
  };
}

describe('agentEpics: a tool outcome that leaves no rune', () => {
  it("still ends the call with execution_timeout at the tool's timeoutMs (virtual time), and the turn completes", async () => {
    const quick = defineTool({ name: 'quick', description: 'Answers at once.', inputSchema: z.object({}), timeoutMs: 5000, execute: () => 'fine' });
    const model = scriptedModel([{ toolCalls: [{ toolName: 'quick', input: {}, toolCallId: 'q1' }] }, { text: 'It timed out.' }]);
    const store = storeFailingSuccesses();
    const scheduler = new VirtualTimeScheduler(undefined, 5000);
    const engine = createEngine({ store, scheduler, epics: agentEpics({ model, tools: [quick] }) });
    engines.push(engine);
    const failed = firstValueFrom(engine.errors$.pipe(filter((error) => error.type === 'command_failed')));
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'go' });

    // The tool answered, and its success could not be stored: the call is still executing.
    expect(await failed).toMatchObject({ command: { stream: a.call('q1'), event: { type: 'success', output: 'fine' } } });
    expect((await callState(engine, 'q1')).value).toBe('executing');
    const done = turnDone(engine);
    const outcome = firstValueFrom(engine.runes$(a.call('q1')).pipe(filter((rune) => rune.kind === 'tool.result')));
    scheduler.flush(); // to the tool's deadline, 5 s after it started
    expect(await outcome).toMatchObject({ event: { type: 'execution_timeout' }, to: 'timeout_result', at: 5000 });
    expect((await done).output).toBe('It timed out.');
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });
});
