import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { INTERRUPTED_BY_RESTART, checkInvariants, type Rune, type RuneStore } from '../../../src/index.js';
import { createEngine, type Engine } from '../../../src/streams/engine.js';
import { memoryStore } from '../../../src/streams/memory-store.js';
import { defineTool, toolCallEffects, type AnyTool } from '../../../src/agents.js';
import { kinds, outcomeOf, runeOf } from './support.js';

/** Whole flows on a real engine (memory store, virtual clock): the epics, the machine and the log together. */

/** A store that outlives its engines, as a file would. */
function durableStore(): RuneStore {
  const store = memoryStore();
  return { ...store, close: async () => {} };
}

/** Every rune of the given streams, in log order per stream. */
async function logOf(store: RuneStore, ...streams: string[]): Promise<Rune[]> {
  return (await Promise.all(streams.map((s) => store.read(s)))).flat();
}

/** A tool that counts its executions and removes nothing. */
function removeTool() {
  const removed: string[] = [];
  const tool = defineTool({
    name: 'remove_file',
    description: 'Removes a file.',
    inputSchema: z.object({ path: z.string() }),
    needsApproval: true,
    execute: async ({ path }) => {
      removed.push(path);
      return { removed: path };
    },
  });
  return { tool, removed };
}

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  inputSchema: z.object({ word: z.string() }),
  execute: async ({ word }, { progress }) => {
    progress(`looking up ${word}`);
    return { word, meaning: 'a letter of an old alphabet' };
  },
});

function engineWith(tools: AnyTool[], options: { store?: RuneStore; scheduler?: VirtualTimeScheduler; approvalTimeoutMs?: number } = {}): Engine {
  const { store = memoryStore(), scheduler = new VirtualTimeScheduler(), approvalTimeoutMs } = options;
  return createEngine({ store, scheduler, epics: [toolCallEffects({ tools, ...(approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs }) })] });
}

const call = (callId: string, toolName: string, args: Record<string, unknown>) => ({ callId, toolName, arguments: args });

describe('tool calls on an engine', () => {
  it('runs a call that needs no approval: tool.call, decision, progress, one tool.result', async () => {
    const store = memoryStore();
    const engine = engineWith([lookup], { store });
    await engine.spawn('call-1', 'tool-call', call('c1', 'lookup', { word: 'rune' }));
    const outcome = await outcomeOf(engine, 'call-1');
    expect(outcome).toMatchObject({ kind: 'tool.result', to: 'completed_result', event: { type: 'success', output: { word: 'rune' } } });
    const runes = await store.read('call-1');
    expect(kinds(runes)).toEqual(['tool.call:spawn', 'no_approval_needed', 'tool.claimed:execution_claimed', 'tool.progress:progress_update', 'tool.result:success']);
    expect(runes[3]!.event).toEqual({ type: 'progress_update', chunk: 'looking up rune' });
    expect(checkInvariants(runes)).toEqual([]);
    await engine.close();
  });

  it('gives the model an error result for an unknown tool and for bad arguments, naming what was wrong', async () => {
    const store = memoryStore();
    const engine = engineWith([lookup], { store });
    await engine.spawn('call-1', 'tool-call', call('c1', 'translate', { text: 'hi' }));
    await engine.spawn('call-2', 'tool-call', call('c2', 'lookup', { word: ['a', 'b'] }));
    expect((await outcomeOf(engine, 'call-1')).event).toEqual({ type: 'execution_error', error: 'unknown tool "translate"; the known tools are: "lookup"' });
    expect((await outcomeOf(engine, 'call-2')).event).toEqual({
      type: 'execution_error',
      error: 'invalid arguments for tool "lookup": word: Invalid input: expected string, received array',
    });
    const runes = await logOf(store, 'call-1', 'call-2');
    expect(kinds(runes)).toEqual([
      'tool.call:spawn',
      'no_approval_needed',
      'tool.result:execution_error',
      'tool.call:spawn',
      'no_approval_needed',
      'tool.result:execution_error',
    ]);
    expect(checkInvariants(runes)).toEqual([]);
    await engine.close();
  });

  it('waits for approval; the approval dispatch alone runs the tool', async () => {
    const store = memoryStore();
    const { tool, removed } = removeTool();
    const engine = engineWith([tool], { store });
    await engine.spawn('call-1', 'tool-call', call('c1', 'remove_file', { path: '/tmp/a' }));
    const requested = await runeOf(engine, 'call-1', (r) => r.to === 'awaiting_approval');
    expect(requested).toMatchObject({ kind: 'tool.approval_requested', event: { policyReason: 'tool "remove_file" requires approval' } });
    expect(removed).toEqual([]);
    await engine.dispatch('call-1', { type: 'approved', approver: 'ann' });
    expect((await outcomeOf(engine, 'call-1')).event).toEqual({ type: 'success', output: { removed: '/tmp/a' } });
    expect(removed).toEqual(['/tmp/a']);
    expect(checkInvariants(await store.read('call-1'))).toEqual([]);
    await engine.close();
  });

  it('two clients approving at once: the first approval runs the tool once, the second is refused', async () => {
    const store = memoryStore();
    const { tool, removed } = removeTool();
    const engine = engineWith([tool], { store });
    await engine.spawn('call-1', 'tool-call', call('c1', 'remove_file', { path: '/tmp/a' }));
    await runeOf(engine, 'call-1', (r) => r.to === 'awaiting_approval');
    const [first, second] = await Promise.all([
      engine.dispatch('call-1', { type: 'approved', approver: 'tab 1' }),
      engine.dispatch('call-1', { type: 'approved', approver: 'tab 2' }),
    ]);
    expect(first).toMatchObject({ accepted: true, rune: { kind: 'tool.approved', event: { approver: 'tab 1' } } });
    expect(second).toEqual({ accepted: false, code: 'not_allowed', reason: 'event "approved" is not allowed in state "executing"' });
    await outcomeOf(engine, 'call-1');
    expect(removed).toEqual(['/tmp/a']);
    const runes = await store.read('call-1');
    expect(kinds(runes)).toEqual([
      'tool.call:spawn',
      'tool.approval_requested:requires_approval',
      'tool.approved:approved',
      'tool.claimed:execution_claimed',
      'tool.result:success',
    ]);
    expect(checkInvariants(runes)).toEqual([]);
    await engine.close();
  });

  it('a denied call never runs', async () => {
    const store = memoryStore();
    const { tool, removed } = removeTool();
    const engine = engineWith([tool], { store });
    await engine.spawn('call-1', 'tool-call', call('c1', 'remove_file', { path: '/' }));
    await runeOf(engine, 'call-1', (r) => r.to === 'awaiting_approval');
    await engine.dispatch('call-1', { type: 'denied', reason: 'not the root' });
    expect((await outcomeOf(engine, 'call-1')).kind).toBe('tool.denied');
    expect(removed).toEqual([]);
    expect(checkInvariants(await store.read('call-1'))).toEqual([]);
    await engine.close();
  });

  it('an approval not given within approvalTimeoutMs ends the call with a timeout result', async () => {
    const store = memoryStore();
    const scheduler = new VirtualTimeScheduler(undefined, 11 * 60_000);
    const { tool, removed } = removeTool();
    const engine = engineWith([tool], { store, scheduler });
    await engine.spawn('call-1', 'tool-call', call('c1', 'remove_file', { path: '/tmp/a' }));
    await runeOf(engine, 'call-1', (r) => r.to === 'awaiting_approval');
    scheduler.flush(); // 10 virtual minutes
    const outcome = await outcomeOf(engine, 'call-1');
    expect(outcome).toMatchObject({ kind: 'tool.result', to: 'timeout_result', event: { type: 'approval_timeout' }, at: 600_000 });
    expect(removed).toEqual([]);
    expect(checkInvariants(await store.read('call-1'))).toEqual([]);
    await engine.close();
  });

  it('cancelling a running call aborts its signal and ends it with a cancelled result', async () => {
    const store = durableStore(); // read after the engine closed
    let signal: AbortSignal | undefined;
    const watch = defineTool({
      name: 'watch',
      description: 'Watches until stopped.',
      inputSchema: z.object({}),
      execute: (_input, context) => {
        signal = context.signal;
        context.progress('watching');
        return new Promise<never>((_, reject) => context.signal.addEventListener('abort', () => reject(context.signal.reason)));
      },
    });
    const engine = engineWith([watch], { store });
    await engine.spawn('call-1', 'tool-call', call('c1', 'watch', {}));
    await runeOf(engine, 'call-1', (r) => r.kind === 'tool.progress');
    await engine.dispatch('call-1', { type: 'cancelled', reason: 'turn interrupted' });
    await outcomeOf(engine, 'call-1');
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toMatchObject({ message: 'tool "watch": call cancelled: turn interrupted' });
    await engine.close(); // anything the aborted tool made the epic emit would land here
    const runes = await store.read('call-1');
    expect(kinds(runes)).toEqual(['tool.call:spawn', 'no_approval_needed', 'tool.claimed:execution_claimed', 'tool.progress:progress_update', 'tool.result:cancelled']);
    expect(checkInvariants(runes)).toEqual([]);
  });
});

describe('tool calls across a restart', () => {
  it('an approval waits in the log through a restart; approved after it, the tool runs; its clock keeps the original deadline', async () => {
    const store = durableStore();
    const { tool, removed } = removeTool();
    const before = engineWith([tool], { store });
    await before.spawn('call-1', 'tool-call', call('c1', 'remove_file', { path: '/tmp/a' })); // at 0
    await runeOf(before, 'call-1', (r) => r.to === 'awaiting_approval');
    await before.close();

    const scheduler = new VirtualTimeScheduler(undefined, 20 * 60_000);
    scheduler.frame = 4 * 60_000; // back 4 minutes later
    const after = engineWith([tool], { store, scheduler });
    const approval = await after.dispatch('call-1', { type: 'approved', approver: 'ann' });
    expect(approval).toMatchObject({ accepted: true, rune: { at: 240_000 } });
    expect((await outcomeOf(after, 'call-1')).event).toEqual({ type: 'success', output: { removed: '/tmp/a' } });
    scheduler.flush(); // past the old deadline: the approved call's clock is disarmed
    await after.close();
    expect(removed).toEqual(['/tmp/a']);
    const runes = await store.read('call-1');
    expect(kinds(runes)).toEqual([
      'tool.call:spawn',
      'tool.approval_requested:requires_approval',
      'tool.approved:approved',
      'tool.claimed:execution_claimed',
      'tool.result:success',
    ]);
    expect(checkInvariants(runes)).toEqual([]);
  });

  /**
   * A call awaiting approval since 0, and a restart at `restartAt`: once the new engine has listed
   * the stored calls, virtual time runs to just before `expectedAt` (nothing may fire), then to
   * `expectedAt`, where the timeout must fire.
   */
  async function approvalTimeoutAfterRestart(restartAt: number, expectedAt: number): Promise<Rune> {
    const store = durableStore();
    const { tool } = removeTool();
    const before = engineWith([tool], { store });
    await before.spawn('call-1', 'tool-call', call('c1', 'remove_file', { path: '/tmp/a' }));
    await runeOf(before, 'call-1', (r) => r.to === 'awaiting_approval');
    await before.close();

    let listed!: () => void;
    const approvalsListed = new Promise<void>((resolve) => (listed = resolve));
    const watched: RuneStore = {
      ...store,
      async *heads(query) {
        yield* store.heads(query);
        if (query?.values?.includes('awaiting_approval')) listed();
      },
    };
    const scheduler = new VirtualTimeScheduler(undefined, expectedAt - 1);
    scheduler.frame = restartAt;
    const after = engineWith([tool], { store: watched, scheduler });
    await approvalsListed; // the clock is armed
    scheduler.flush();
    await new Promise((resolve) => setImmediate(resolve)); // a timeout sent too early would land here
    expect((await after.snapshot<{ value: string }>('call-1'))?.state.value).toBe('awaiting_approval');
    scheduler.maxFrames = expectedAt;
    scheduler.flush();
    const outcome = await outcomeOf(after, 'call-1');
    await after.close();
    expect(checkInvariants(await store.read('call-1'))).toEqual([]);
    return outcome;
  }

  it('an approval still waiting times out at its original deadline after a restart', async () => {
    expect(await approvalTimeoutAfterRestart(4 * 60_000, 600_000)).toMatchObject({ event: { type: 'approval_timeout' }, at: 600_000 });
  });

  it('an approval whose deadline passed while the process was down times out at once', async () => {
    expect(await approvalTimeoutAfterRestart(25 * 60_000, 25 * 60_000)).toMatchObject({ event: { type: 'approval_timeout' }, at: 25 * 60_000 });
  });

  it('a call left executing by a crash: claimed, it runs again under a new claim if its tool is rerunSafe, else ends "interrupted by restart"; unclaimed, it runs once; one result each', async () => {
    const store = durableStore();
    let lookups = 0;
    let charges = 0;
    const safeLookup = defineTool({
      name: 'lookup',
      description: 'A read.',
      inputSchema: z.object({ word: z.string() }),
      rerunSafe: true,
      execute: async ({ word }) => ({ word, lookups: ++lookups }),
    });
    const chargeCard = defineTool({
      name: 'charge_card',
      description: 'Not safe to run twice.',
      inputSchema: z.object({ cents: z.number() }),
      execute: async () => ({ charges: ++charges }),
    });
    // The process that crashed: three calls had entered executing; two were claimed (their tools started), one was not.
    const crashed = createEngine({ store });
    for (const [stream, input, claim] of [
      ['call-1', call('c1', 'lookup', { word: 'rune' }), 'dead-1'],
      ['call-2', call('c2', 'charge_card', { cents: 500 }), 'dead-2'],
      ['call-3', call('c3', 'charge_card', { cents: 700 }), undefined],
    ] as const) {
      await crashed.spawn(stream, 'tool-call', input);
      await crashed.dispatch(stream, { type: 'no_approval_needed' });
      if (claim !== undefined) await crashed.dispatch(stream, { type: 'execution_claimed', claim });
    }
    await crashed.close();

    for (let restart = 0; restart < 2; restart++) {
      const engine = engineWith([safeLookup, chargeCard], { store });
      await Promise.all([outcomeOf(engine, 'call-1'), outcomeOf(engine, 'call-2'), outcomeOf(engine, 'call-3')]);
      await engine.close();
    }

    const runes = await logOf(store, 'call-1', 'call-2', 'call-3');
    expect(kinds(runes)).toEqual([
      ...['tool.call:spawn', 'no_approval_needed', 'tool.claimed:execution_claimed', 'tool.claimed:execution_claimed', 'tool.result:success'],
      ...['tool.call:spawn', 'no_approval_needed', 'tool.claimed:execution_claimed', 'tool.result:execution_error'],
      ...['tool.call:spawn', 'no_approval_needed', 'tool.claimed:execution_claimed', 'tool.result:success'],
    ]);
    expect(runes[3]!.event).toMatchObject({ type: 'execution_claimed', supersedes: 'dead-1' });
    expect(runes[4]!.event).toEqual({ type: 'success', output: { word: 'rune', lookups: 1 } });
    expect(runes[8]!.event).toEqual({ type: 'execution_error', error: INTERRUPTED_BY_RESTART });
    expect(runes[11]!.event).toEqual({ type: 'execution_claimed', claim: expect.any(String) });
    expect(runes[12]!.event).toEqual({ type: 'success', output: { charges: 1 } });
    expect([lookups, charges]).toEqual([1, 1]);
    expect(checkInvariants(runes)).toEqual([]);
  });

  it('a call spawned just before a crash gets its policy decision at the next start', async () => {
    const store = durableStore();
    const crashed = createEngine({ store });
    await crashed.spawn('call-1', 'tool-call', call('c1', 'lookup', { word: 'rune' }));
    await crashed.close();
    const engine = engineWith([lookup], { store });
    expect((await outcomeOf(engine, 'call-1')).event).toMatchObject({ type: 'success' });
    await engine.close();
    const runes = await store.read('call-1');
    expect(kinds(runes)).toEqual(['tool.call:spawn', 'no_approval_needed', 'tool.claimed:execution_claimed', 'tool.progress:progress_update', 'tool.result:success']);
    expect(checkInvariants(runes)).toEqual([]);
  });
});
