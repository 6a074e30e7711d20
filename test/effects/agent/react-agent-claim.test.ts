import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, reactAgentEpics, scriptedModel } from '../../../src/agents.js';
import { INTERRUPTED_BY_RESTART, agentStreams, createEngine, memoryStore, type AgentState, type Engine, type EngineError, type RuneStore } from '../../../src/index.js';

/**
 * A ReAct agent's own tool runs are claimed durably before their tools start (`tool-call-claimed`,
 * a `tool.claimed` rune), so a call never runs twice: not after a restart, not with two runners.
 * Two engines following one memory store stand for two processes sharing a log.
 */

const REACT = agentStreams('conv/c1', 'a1').react;

/** A store several engines share, which outlives each of them (as a database would). */
const shared = (store: RuneStore): RuneStore => ({ ...store, close: async () => {} });

/** The agent's call `t1` of `append` left in flight by a process that died, claimed by it (`claim`) or not. */
async function leftInFlight(store: RuneStore, claim?: string): Promise<void> {
  const dead = createEngine({ store: shared(store) });
  await dead.spawn(REACT, 'react-agent');
  await dead.dispatch(REACT, { type: 'user-message-received', messageId: 'm1', content: 'pay', timestamp: 1 });
  const toolCalls = { t1: { name: 'append', parameters: '{"line":"paid"}', calledAt: 2 } };
  await dead.dispatch(REACT, { type: 're-act-observed', calledLlmAt: 1, observation: { type: 'continue-re-act', toolCalls }, timestamp: 2 });
  if (claim !== undefined) await dead.dispatch(REACT, { type: 'tool-call-claimed', toolCallId: 't1', claim, timestamp: 3 });
  await dead.close();
}

/** A tool with a side effect (a line appended) that records the call's durable record when it starts. */
function appendTool(rerunSafe = false) {
  const lines: string[] = [];
  const seen: Array<AgentState['toolCalls'][string] | undefined> = [];
  let engine: Engine | undefined;
  const tool = defineTool({
    name: 'append',
    description: 'Appends a line.',
    inputSchema: z.object({ line: z.string() }),
    rerunSafe,
    execute: async ({ line }) => {
      seen.push((await engine!.snapshot<AgentState>(REACT))?.state.toolCalls['t1']);
      lines.push(line);
      return `${lines.length} lines`;
    },
  });
  return { tool, lines, seen, use: (e: Engine) => (engine = e) };
}

/** The state once the call `t1` has its result. */
const resultOf = (engine: Engine) => firstValueFrom(engine.state$<AgentState>(REACT).pipe(filter((s) => s.toolCalls['t1']?.result != null)));

/** The agent's claim events, in log order. */
const claimsIn = async (store: RuneStore) => (await store.read(REACT)).filter((rune) => rune.kind === 'tool.claimed').map((rune) => rune.event);

describe('a ReAct agent claims its tool calls (memory store)', () => {
  it('a call is claimed before its tool runs: the tool sees its own claim recorded, and the rune is a tool.claimed', async () => {
    const store = memoryStore();
    const { tool, lines, seen, use } = appendTool();
    const model = scriptedModel([{ toolCalls: [{ toolName: 'append', input: { line: 'paid' }, toolCallId: 't1' }] }, { text: 'Paid.' }]);
    const engine = createEngine({ store: shared(store), epics: reactAgentEpics({ model, tools: [tool], claimId: () => 'run-1' }) });
    use(engine);
    await engine.spawn(REACT, 'react-agent');
    const done = resultOf(engine);
    await engine.dispatch(REACT, { type: 'user-message-received', messageId: 'm1', content: 'pay', timestamp: 1 });
    expect((await done).toolCalls['t1']?.result).toMatchObject({ isSuccess: true, content: '1 lines' });
    await engine.close();
    expect(seen).toEqual([expect.objectContaining({ claim: 'run-1', attempt: 1, result: null })]);
    expect(lines).toEqual(['paid']);
    const runes = await store.read(REACT);
    const claimAt = runes.findIndex((rune) => rune.kind === 'tool.claimed');
    expect(runes[claimAt]).toMatchObject({ event: { type: 'tool-call-claimed', toolCallId: 't1', claim: 'run-1' }, payload: { callId: 't1', claim: 'run-1', attempt: 1 } });
    expect(claimAt).toBeLessThan(runes.findIndex((rune) => rune.kind === 'tool-call-completed'));
  });

  it.each([
    ['unclaimed (it never started), not rerunSafe: claimed and run once', undefined, false, ['paid']],
    ['claimed (it started), not rerunSafe: interrupted without running', 'dead', false, []],
    ['claimed (it started), rerunSafe: run again under a new claim superseding the dead one', 'dead', true, ['paid']],
  ] as const)('a call taken over after a restart, %s', async (_, deadClaim, rerunSafe, expectedLines) => {
    const store = memoryStore();
    await leftInFlight(store, deadClaim);
    const { tool, lines, seen, use } = appendTool(rerunSafe);
    const engine = createEngine({ store: shared(store), epics: reactAgentEpics({ model: scriptedModel([{ text: 'Done.' }]), tools: [tool], claimId: () => 'run-2' }) });
    use(engine);
    const result = (await resultOf(engine)).toolCalls['t1']?.result;
    await engine.close();
    expect(lines).toEqual(expectedLines);
    const claims = await claimsIn(store);
    if (expectedLines.length === 0) {
      expect(result).toMatchObject({ isSuccess: false, error: INTERRUPTED_BY_RESTART });
      expect(claims).toEqual([{ type: 'tool-call-claimed', toolCallId: 't1', claim: 'dead', timestamp: 3 }]);
      return;
    }
    expect(result).toMatchObject({ isSuccess: true, content: '1 lines' });
    expect(seen).toEqual([expect.objectContaining({ claim: 'run-2', attempt: deadClaim === undefined ? 1 : 2 })]);
    expect(claims.at(-1)).toEqual({
      type: 'tool-call-claimed',
      toolCallId: 't1',
      claim: 'run-2',
      ...(deadClaim === undefined ? {} : { supersedes: deadClaim }),
      timestamp: expect.any(Number),
    });
  });

  it.each([
    ['unclaimed', undefined, false],
    ['claimed by the dead process, rerunSafe', 'dead', true],
  ] as const)('two engines following one store both take over the same call (%s): its tool runs once, under one claim', async (_, deadClaim, rerunSafe) => {
    const store = memoryStore();
    await leftInFlight(store, deadClaim);
    const { tool, lines, use } = appendTool(rerunSafe);
    // Both start with the call in flight in the store, and both resume it: their claims race on the stream's seq.
    // No claim is written until both have claimed, so neither can hear the other's first and stand aside.
    const attempts: string[] = [];
    let release = (): void => {};
    const bothClaimed = new Promise<void>((resolve) => (release = resolve));
    const racing: RuneStore = {
      ...shared(store),
      appendSync: undefined,
      append: async (runes, options) => {
        if (runes.some((rune) => rune.event.type === 'tool-call-claimed')) await bothClaimed;
        return store.append(runes, options);
      },
    };
    const engines = ['a', 'b'].map((name) =>
      createEngine({
        store: racing,
        followStore: true,
        epics: reactAgentEpics({
          model: scriptedModel([{ text: 'Done.' }]),
          tools: [tool],
          claimId: () => {
            if (attempts.push(name) === 2) release();
            return `run-${name}`;
          },
        }),
      }),
    );
    use(engines[0]!);
    const errors: EngineError[] = [];
    for (const engine of engines) engine.errors$.subscribe((error) => errors.push(error));
    await Promise.all(engines.map((engine) => resultOf(engine)));
    // The loser's claim must have been refused or failed, not run: give a late start a chance to show.
    await new Promise((resolve) => setImmediate(resolve));
    await Promise.all(engines.map((engine) => engine.close()));
    expect(lines).toEqual(['paid']);
    const claims = await claimsIn(store);
    expect(claims.slice(deadClaim === undefined ? 0 : 1)).toEqual([
      {
        type: 'tool-call-claimed',
        toolCallId: 't1',
        claim: expect.stringMatching(/^run-[ab]$/),
        ...(deadClaim === undefined ? {} : { supersedes: deadClaim }),
        timestamp: expect.any(Number),
      },
    ]);
    expect((await store.read(REACT)).filter((rune) => rune.kind === 'tool-call-completed')).toHaveLength(1);
    // The loser's claim is reported: refused by the machine (re-applied to the newer state) or failed on the store's seq check.
    // (Both engines also answer the result with a model call: without leases, the LLM call is not theirs to share.)
    const claimErrors = errors.filter(
      (e) =>
        (e.type === 'command_rejected' || e.type === 'command_failed') && e.command.stream === REACT && 'event' in e.command && e.command.event.type === 'tool-call-claimed',
    );
    expect(attempts.sort()).toEqual(['a', 'b']);
    expect(claimErrors).toHaveLength(1);
  });
});
