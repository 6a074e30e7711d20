import { filter, firstValueFrom } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { INTERRUPTED_BY_RESTART, checkInvariants, createEngine, memoryStore, type EngineError, type Rune, type RuneStore, type ToolCallState } from '../../../src/index.js';
import { defineTool, toolCallEffects } from '../../../src/agents.js';
import { executionStart } from '../../../src/effects/tool-call-recovery.js';
import { epicContext } from '../../support/epic-context.js';
import { callRune, callState, kinds, outcomeOf } from './support.js';

/** The execution claim: a run claims its call durably before the tool starts, so it never runs twice. */

const call = { callId: 'c1', toolName: 'append', arguments: { line: 'paid' } };

describe('executionStart: the one rule for a call found executing', () => {
  it.each([
    [undefined, 'live', false, { action: 'claim' }],
    [undefined, 'resumed', false, { action: 'claim' }], // never started, whatever the tool
    [undefined, 'resumed', true, { action: 'claim' }],
    ['run-a', 'live', true, { action: 'leave' }], // another runner's claim came first
    ['run-a', 'resumed', true, { action: 'claim', supersedes: 'run-a' }],
    ['run-a', 'resumed', false, { action: 'interrupt' }],
  ] as const)('claim %s, %s, rerunSafe %s -> %o', (claim, origin, rerunSafe, start) => {
    expect(executionStart(claim === undefined ? {} : { claim }, origin, rerunSafe)).toEqual(start);
  });
});

describe('the claim without an engine', () => {
  it("a run whose claim loses (another claim's rune comes first) never starts its tool, and emits nothing more", () => {
    let runs = 0;
    const tool = defineTool({ name: 'append', description: 'Appends.', inputSchema: z.object({ line: z.string() }), execute: () => ++runs });
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('-ab', {
        a: callRune('call-1', 2, { type: 'no_approval_needed' }, 'pending_call', 'executing'),
        b: callRune('call-1', 3, { type: 'execution_claimed', claim: 'other' }, 'executing', 'executing', { kind: 'tool.claimed' }),
      });
      const context = epicContext(scheduler, { state: <S>() => callState(call) as S });
      expectObservable(toolCallEffects({ tools: [tool], claimId: () => 'mine' })(runes, context, undefined)).toBe('-m', {
        m: { stream: 'call-1', event: { type: 'execution_claimed', claim: 'mine' } },
      });
    });
    expect(runs).toBe(0);
  });

  it('a claim id the machine would refuse ends the call with an error naming it; the tool does not run', () => {
    let runs = 0;
    const tool = defineTool({ name: 'append', description: 'Appends.', inputSchema: z.object({ line: z.string() }), execute: () => ++runs });
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('-a', { a: callRune('call-1', 2, { type: 'no_approval_needed' }, 'pending_call', 'executing') });
      const context = epicContext(scheduler, { state: <S>() => callState(call) as S });
      expectObservable(toolCallEffects({ tools: [tool], claimId: () => 'x'.repeat(129) })(runes, context, undefined)).toBe('-e', {
        e: {
          stream: 'call-1',
          event: {
            type: 'execution_error',
            error: 'the tool runner failed: TypeError: "claimId" gave an id the machine refuses: ✖ Too big: expected string to have <=128 characters → at claim',
          },
        },
      });
    });
    expect(runs).toBe(0);
    expect(() => toolCallEffects({ tools: [tool], claimId: 'mine' as never })).toThrow('toolCallEffects: "claimId" must be a function giving a new claim id, got string');
  });
});

/** A store several engines share, which outlives each of them (as a database would). */
const shared = (store: RuneStore): RuneStore => ({ ...store, close: async () => {} });

/** The call `call-1` left executing by a process that died, claimed by it (`claim`) or not. */
async function leftExecuting(store: RuneStore, claim?: string): Promise<void> {
  const dead = createEngine({ store: shared(store) });
  await dead.spawn('call-1', 'tool-call', call);
  await dead.dispatch('call-1', { type: 'no_approval_needed' });
  if (claim !== undefined) await dead.dispatch('call-1', { type: 'execution_claimed', claim });
  await dead.close();
}

/** A tool with a side effect (a line appended) that records the call's durable state when it starts. */
function appendTool(rerunSafe = false) {
  const lines: string[] = [];
  const seen: Array<ToolCallState | undefined> = [];
  let engineOf: () => { snapshot(stream: string): Promise<{ state: unknown } | undefined> } = () => {
    throw new Error('no engine yet');
  };
  const tool = defineTool({
    name: 'append',
    description: 'Appends a line.',
    inputSchema: z.object({ line: z.string() }),
    rerunSafe,
    execute: async ({ line }) => {
      seen.push((await engineOf().snapshot('call-1'))?.state as ToolCallState | undefined);
      lines.push(line);
      return lines.length;
    },
  });
  return { tool, lines, seen, use: (engine: typeof engineOf extends () => infer E ? E : never) => (engineOf = () => engine) };
}

describe('the claim on an engine (memory store)', () => {
  it('a call is claimed before its tool runs: the tool sees its own claim recorded', async () => {
    const store = memoryStore();
    const { tool, lines, seen, use } = appendTool();
    const engine = createEngine({ store, epics: [toolCallEffects({ tools: [tool], claimId: () => 'run-1' })] });
    use(engine);
    await engine.spawn('call-1', 'tool-call', call);
    expect((await outcomeOf(engine, 'call-1')).event).toEqual({ type: 'success', output: 1 });
    expect(seen).toEqual([expect.objectContaining({ value: 'executing', claim: 'run-1', attempt: 1 })]);
    expect(lines).toEqual(['paid']);
    const runes = await store.read('call-1');
    expect(kinds(runes)).toEqual(['tool.call:spawn', 'no_approval_needed', 'tool.claimed:execution_claimed', 'tool.result:success']);
    expect(runes[2]!.event).toEqual({ type: 'execution_claimed', claim: 'run-1' });
    expect(checkInvariants(runes)).toEqual([]);
    await engine.close();
  });

  it.each([
    ['unclaimed (it never started), not rerunSafe: claimed and run once', undefined, false, ['paid'], 'success'],
    ['claimed (it started), not rerunSafe: interrupted without running', 'dead', false, [], 'interrupted'],
    ['claimed (it started), rerunSafe: run again under a new claim superseding the dead one', 'dead', true, ['paid'], 'success'],
  ] as const)('a call taken over after a restart, %s', async (_, deadClaim, rerunSafe, expectedLines, outcome) => {
    const store = memoryStore();
    await leftExecuting(store, deadClaim);
    const { tool, lines, seen, use } = appendTool(rerunSafe);
    const engine = createEngine({ store: shared(store), epics: [toolCallEffects({ tools: [tool], claimId: () => 'run-2' })] });
    use(engine);
    const result = (await outcomeOf(engine, 'call-1')).event;
    await engine.close();
    expect(lines).toEqual(expectedLines);
    const claims = (await store.read('call-1')).filter((r) => r.kind === 'tool.claimed').map((r) => r.event);
    if (outcome === 'interrupted') {
      expect(result).toEqual({ type: 'execution_error', error: INTERRUPTED_BY_RESTART });
      expect(claims).toEqual([{ type: 'execution_claimed', claim: 'dead' }]);
      return;
    }
    expect(result).toEqual({ type: 'success', output: 1 });
    expect(seen).toEqual([expect.objectContaining({ claim: 'run-2', attempt: deadClaim === undefined ? 1 : 2 })]);
    expect(claims.at(-1)).toEqual({ type: 'execution_claimed', claim: 'run-2', ...(deadClaim === undefined ? {} : { supersedes: deadClaim }) });
    expect(checkInvariants(await store.read('call-1'))).toEqual([]);
  });

  it.each([
    ['unclaimed', undefined, false],
    ['claimed by the dead process, rerunSafe', 'dead', true],
  ] as const)('two engines following one store both take over the same call (%s): its tool runs once, under one claim', async (_, deadClaim, rerunSafe) => {
    const store = memoryStore();
    await leftExecuting(store, deadClaim);
    const { tool, lines, use } = appendTool(rerunSafe);
    // Both start with the call executing in the store, and both resume it: their claims race on the stream's seq.
    const engines = ['a', 'b'].map((name) =>
      createEngine({ store: shared(store), followStore: true, epics: [toolCallEffects({ tools: [tool], claimId: () => `run-${name}` })] }),
    );
    use(engines[0]!);
    const errors: EngineError[] = [];
    for (const engine of engines) engine.errors$.subscribe((error) => errors.push(error));
    await Promise.all(engines.map((engine) => outcomeOf(engine, 'call-1')));
    // The loser's claim must have been refused or failed, not run: give a late start a chance to show.
    await firstValueFrom(engines[0]!.runes$('call-1').pipe(filter((r) => r.kind === 'tool.result')));
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.all(engines.map((engine) => engine.close()));
    expect(lines).toEqual(['paid']);
    const runes = await store.read('call-1');
    const claims = runes.filter((r) => r.kind === 'tool.claimed' && r.seq > (deadClaim === undefined ? 2 : 3));
    expect(claims).toHaveLength(1);
    expect(runes.filter((r) => r.kind === 'tool.result')).toHaveLength(1);
    expect(checkInvariants(runes)).toEqual([]);
    // The loser's claim is reported: refused by the machine (re-applied to the newer state) or failed on the store's seq check.
    expect(errors.map((e) => e.type)).toEqual([expect.stringMatching(/^command_(rejected|failed)$/)]);
  });
});
