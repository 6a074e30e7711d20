import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { agentEpics, scriptedModel, type ScriptedModel } from '../../../src/agents.js';
import { subAgentId } from '../../../src/effects/agent/delegation.js';
import { agentStreams, checkInvariants, createEngine, type Engine, type EngineError, type RuneStore, type TurnEngineState } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { runAndKill } from '../../support/kill-worker.js';
import { storeLog } from '../../support/store-log.js';

const workerScript = fileURLToPath(new URL('../../fixtures/multi-agent-crash-worker.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'runestream-multi-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ROOT = agentStreams('conv/c1', 'root');
const SUB = agentStreams('conv/c1', subAgentId('root', 'd1'));

/** Runs the worker on `path` and kills it with SIGKILL once the researcher's turn has streamed two deltas, its rune `seq`. */
async function crashWhileStreaming(path: string, mode: 'start' | 'resume', seq: number): Promise<void> {
  const run = await runAndKill(workerScript, [path, mode]);
  expect(run.signal).toBe('SIGKILL');
  expect(run.stderr).not.toContain('multi-agent-crash-worker:'); // it found nothing wrong before it died
  expect(run.line).toBe(`streaming ${SUB.turn} ${seq}`);
}

/** A fresh engine on the dead worker's file, the lead answering `leadAnswer`, the researcher `researcher`; its errors collected. */
function restarted(store: RuneStore, leadAnswer: string, researcher: ScriptedModel) {
  const lead = scriptedModel([{ text: leadAnswer }]);
  // A rune per delta (deltaFlushMs 0), as the worker's: the runes are counted.
  const engine = createEngine({ store, epics: agentEpics({ model: lead, agents: { lead: {}, researcher: { model: researcher } }, deltaFlushMs: 0 }) });
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  return { engine, errors, lead };
}

const rootTurnDone = (engine: Engine) => firstValueFrom(engine.state$<TurnEngineState>(ROOT.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));

describe('multi-agent crash: the process dies with SIGKILL while a sub-agent turn streams', () => {
  it("a fresh engine on the file starts the sub-agent's task once more; the delegate call gets its answer and the root's turn completes", async () => {
    const path = join(dir, 'multi.db');
    await crashWhileStreaming(path, 'start', 4); // spawned, turn.started, two deltas

    const store = sqliteStore(path); // recovers the WAL the dead worker left
    const before = await storeLog(store);
    // The dead process left the root waiting on its delegate call, and the researcher mid-answer.
    expect(before.filter((r) => r.stream === ROOT.call('d1')).at(-1)?.to).toBe('executing');
    expect(before.filter((r) => r.stream === SUB.turn).at(-1)).toMatchObject({ kind: 'turn.assistant_delta', to: 'streaming' });
    expect(checkInvariants(before).map((v) => `${v.invariant} ${v.rune.stream}`)).toEqual([`INV-TOOL-TERMINAL ${ROOT.call('d1')}`]);

    const researcher = scriptedModel([{ text: 'A is 1' }]);
    const { engine, errors, lead } = restarted(store, 'A is 1, says the researcher.', researcher);
    try {
      await rootTurnDone(engine);
      const after = await storeLog(store);
      const runesOf = (stream: string) => after.filter((r) => r.stream === stream && r.seq > before.filter((b) => b.stream === stream).length);

      // The researcher's cut turn ends "interrupted by restart"; its task runs again as its second turn, once.
      expect(runesOf(SUB.turn).map((r) => r.kind)).toEqual([
        'turn.interrupted',
        'turn.started',
        'turn.assistant_delta',
        'turn.assistant_delta',
        'turn.assistant_delta',
        'turn.completed',
      ]);
      expect(runesOf(SUB.turn)[0]!.event).toEqual({ type: 'interrupt', reason: 'interrupted by restart', usage: { modelCalls: 1 } });
      expect(runesOf(SUB.turn)[1]!.event).toEqual({ type: 'start_turn', input: 'find A' });
      expect(researcher.doStreamCalls).toHaveLength(1);
      // It sees its task, the answer the crash cut ("Looking it"), and its task again.
      const prompt = researcher.doStreamCalls[0]!.prompt.filter((message) => message.role !== 'system');
      expect(prompt.map((message) => [message.role, JSON.stringify(message.content)])).toEqual([
        ['user', expect.stringContaining('find A')],
        ['assistant', expect.stringContaining('Looking it')],
        ['user', expect.stringContaining('find A')],
      ]);

      // The delegate call has exactly one result, the second turn's answer; the root's turn goes on to complete.
      const results = after.filter((r) => r.stream === ROOT.call('d1') && r.kind === 'tool.result');
      expect(results.map((r) => [r.to, r.event])).toEqual([['completed_result', { type: 'success', output: 'A is 1' }]]);
      expect(runesOf(ROOT.turn).map((r) => r.kind)).toEqual(['turn.tools_finished', ...Array(6).fill('turn.assistant_delta'), 'turn.completed']);
      expect(JSON.stringify(lead.doStreamCalls[0]!.prompt)).toContain('A is 1');
      expect((await engine.snapshot<TurnEngineState>(ROOT.turn))?.state.output).toBe('Delegating.A is 1, says the researcher.');
      expect(after.filter((r) => r.stream === SUB.lifecycle).map((r) => r.kind)).toEqual([
        'agent.spawning',
        'agent.ready',
        'turn.started',
        'turn.interrupted',
        'turn.started',
        'turn.completed',
      ]);

      expect(checkInvariants(after)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await engine.close(); // closes the store too
    }
  });

  it("the task is started again once only: a second turn cut by a crash ends the delegate call with an error result, and the root's turn goes on", async () => {
    const path = join(dir, 'twice.db');
    await crashWhileStreaming(path, 'start', 4);
    await crashWhileStreaming(path, 'resume', 8); // interrupted (idle again), started again, two deltas

    const store = sqliteStore(path);
    // The second process died in the researcher's second turn, as the first did in its first.
    expect((await storeLog(store)).filter((r) => r.stream === SUB.turn).at(-1)).toMatchObject({ seq: 8, kind: 'turn.assistant_delta', to: 'streaming' });
    const researcher = scriptedModel([]);
    const { engine, errors, lead } = restarted(store, 'The researcher could not finish.', researcher);
    try {
      await rootTurnDone(engine);
      const after = await storeLog(store);
      expect(after.filter((r) => r.stream === SUB.turn && r.seq > 8).map((r) => r.kind)).toEqual(['turn.interrupted']);
      expect(researcher.doStreamCalls).toHaveLength(0);
      const results = after.filter((r) => r.stream === ROOT.call('d1') && r.kind === 'tool.result');
      expect(results.map((r) => [r.to, r.event])).toEqual([
        ['error_result', { type: 'execution_error', error: "the sub-agent's turn was interrupted: interrupted by restart" }],
      ]);
      expect(JSON.stringify(lead.doStreamCalls[0]!.prompt)).toContain('interrupted by restart');
      expect(after.filter((r) => r.stream === ROOT.turn).at(-1)?.kind).toBe('turn.completed');
      expect(checkInvariants(after)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await engine.close();
    }
  });
});
