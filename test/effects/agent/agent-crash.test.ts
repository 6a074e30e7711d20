import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../../src/agents.js';
import { checkInvariants, createEngine, type EngineError, type Rune, type TurnEngineState, type AgentLifecycleState, agentStreams } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { runAndKill } from '../../support/kill-worker.js';
import { storeLog } from '../../support/store-log.js';

const workerScript = fileURLToPath(new URL('../../fixtures/agent-crash-worker.ts', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'runestream-agent-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kinds = (runes: readonly Rune[]): string[] => runes.map((r) => r.kind);

/** What a fresh engine on the file the killed worker left does with the call it had running. */
async function restart(path: string, slowTool: ReturnType<typeof slow>['tool']) {
  const store = sqliteStore(path); // recovers the WAL the dead worker left
  const before = await storeLog(store);
  const model = scriptedModel([{ text: 'The backup is settled.' }]);
  // A rune per delta (deltaFlushMs 0), as the worker's: the test counts them.
  const engine = createEngine({ store, epics: agentEpics({ model, tools: [slowTool], deltaFlushMs: 0 }) });
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  const a = agentStreams('conv/c1', 'a1');
  try {
    await firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await firstValueFrom(engine.state$<AgentLifecycleState>(a.lifecycle).pipe(filter((s) => s.value === 'idle'))); // told of the turn's end after it
    const after = await storeLog(store);
    return { before, after, model, errors, runesOf: (stream: string) => after.filter((r) => r.stream === stream) };
  } finally {
    await engine.close(); // closes the store too
  }
}

/** The tool `slow` as the restarted engine has it: it finishes at once, counting its runs. */
function slow(rerunSafe: boolean) {
  let runs = 0;
  const tool = defineTool({
    name: 'slow',
    description: 'Takes its time.',
    inputSchema: z.object({ job: z.string() }),
    rerunSafe,
    execute: ({ job }) => {
      runs++;
      return { done: job };
    },
  });
  return { tool, runs: () => runs };
}

/** Runs the worker on `path` and kills it with SIGKILL once its call is executing; checks it got that far cleanly. */
async function crashWhileExecuting(path: string, mode: 'interrupt' | 'rerun'): Promise<void> {
  const run = await runAndKill(workerScript, [path, mode]);
  expect(run.signal).toBe('SIGKILL');
  expect(run.stderr).not.toContain('agent-crash-worker:'); // it found nothing wrong before it died
  expect(run.line).toBe(`executing ${agentStreams('conv/c1', 'a1').call('s1')} 2`);
}

describe('agent crash: the process dies with SIGKILL while a tool call is executing', () => {
  it('a tool that is not rerunSafe: the call ends "interrupted by restart", once, and the turn goes on to the answer', async () => {
    const path = join(dir, 'interrupt.db');
    const a = agentStreams('conv/c1', 'a1');
    await crashWhileExecuting(path, 'interrupt');

    const tool = slow(false);
    const { before, after, model, errors, runesOf } = await restart(path, tool.tool);

    // The killed worker left the call executing and claimed (its tool had started): a live log, with a call that has no outcome.
    expect(before.filter((r) => r.stream === a.call('s1')).map((r) => `${r.kind} ${r.to}`)).toEqual([
      'tool.call pending_call',
      'no_approval_needed executing',
      'tool.claimed executing',
    ]);
    expect(before.filter((r) => r.stream === a.turn).at(-1)?.to).toBe('tool_executing');
    expect(checkInvariants(before).map((v) => `${v.invariant} ${v.rune.stream}`)).toEqual([`INV-TOOL-TERMINAL ${a.call('s1')}`]);

    // After the restart: exactly one outcome, the interruption; the tool did not run again.
    const results = runesOf(a.call('s1')).filter((r) => r.kind === 'tool.result');
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ seq: 4, from: 'executing', to: 'error_result', event: { type: 'execution_error', error: 'interrupted by restart' } });
    expect(tool.runs()).toBe(0);

    // The turn went on: tools_finished, the model answered (having seen the interruption), completed, idle.
    expect(kinds(runesOf(a.turn))).toEqual([
      'spawned',
      'turn.started',
      'turn.assistant_delta', // 'Starting the job.': three deltas, before the crash
      'turn.assistant_delta',
      'turn.assistant_delta',
      'turn.tool_calls_received',
      'turn.tools_finished', // after the restart
      'turn.assistant_delta', // 'The backup is settled.'
      'turn.assistant_delta',
      'turn.assistant_delta',
      'turn.assistant_delta',
      'turn.completed',
    ]);
    expect(model.doStreamCalls).toHaveLength(1);
    const toolMessage = model.doStreamCalls[0]!.prompt.find((message) => message.role === 'tool');
    expect(toolMessage?.content).toEqual([
      expect.objectContaining({ type: 'tool-result', toolCallId: 's1', toolName: 'slow', output: { type: 'error-text', value: 'interrupted by restart' } }),
    ]);
    expect(runesOf(a.lifecycle).at(-1)).toMatchObject({ kind: 'turn.completed', to: 'idle' });

    // Every stream's runes, the dead process's and the restarted one's: a finished, clean log.
    expect(checkInvariants(after)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('a rerunSafe tool: the call runs again after the restart and succeeds, with exactly one result', async () => {
    const path = join(dir, 'rerun.db');
    const a = agentStreams('conv/c1', 'a1');
    await crashWhileExecuting(path, 'rerun');

    const tool = slow(true);
    const { before, after, model, errors, runesOf } = await restart(path, tool.tool);

    expect(before.filter((r) => r.stream === a.call('s1')).at(-1)).toMatchObject({ kind: 'tool.claimed', to: 'executing' });
    expect(tool.runs()).toBe(1);
    // Claimed again, superseding the dead worker's claim, then its one result.
    const deadClaim = before.filter((r) => r.stream === a.call('s1')).at(-1)!.event.claim;
    expect(runesOf(a.call('s1'))[3]).toMatchObject({ kind: 'tool.claimed', event: { supersedes: deadClaim } });
    const results = runesOf(a.call('s1')).filter((r) => r.kind === 'tool.result');
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ seq: 5, from: 'executing', to: 'completed_result', event: { type: 'success', output: { done: 'backup' } } });
    expect(kinds(runesOf(a.turn)).slice(-2)).toEqual(['turn.assistant_delta', 'turn.completed']);
    expect(JSON.stringify(model.doStreamCalls[0]!.prompt)).toContain('"done":"backup"');
    expect(checkInvariants(after)).toEqual([]);
    expect(errors).toEqual([]);
  });
});
