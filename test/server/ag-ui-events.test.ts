import type { AGUIEvent } from '@ag-ui/core';
import { describe, expect, it } from 'vitest';
import type { AnyMachine, EventObject } from '../../src/reducers/machine.js';
import type { AnyRuneEvent, Rune } from '../../src/reducers/rune.js';
import { agentStreams } from '../../src/reducers/stream-ids.js';
import { toolCall } from '../../src/reducers/tool-call/machine.js';
import type { ToolCallState } from '../../src/reducers/tool-call/schema.js';
import { turnEngine } from '../../src/reducers/turn-engine/machine.js';
import type { TurnEngineState } from '../../src/reducers/turn-engine/schema.js';
import { callRuneEvents, interruptRun, roundStatus, startRun, turnRuneEvents, type AgUiRun } from '../../src/server/ag-ui/ag-ui-events.js';
import { jsonPatch } from '../../src/server/json-patch.js';

const agent = agentStreams('conv/t1', 'a1');

/** The runes a machine's stream appends for a spawn and these events, each checked accepted: what the engine would store. */
function runesOf(machine: AnyMachine, stream: string, input: unknown, events: readonly AnyRuneEvent[]): Rune[] {
  let state = machine.initial(input);
  const runes: Rune[] = [{ stream, seq: 1, machine: machine.id, kind: machine.spawnKind, event: { type: 'spawn', input }, to: (state as { value: string }).value, at: 0 }];
  for (const [i, event] of events.entries()) {
    const step = machine.step(state, event as EventObject);
    if (!step.accepted) throw new Error(`${machine.id} refused ${event.type}: ${step.reason}`);
    const from = (state as { value: string }).value;
    state = step.state;
    runes.push({
      stream,
      seq: i + 2,
      machine: machine.id,
      kind: step.kind,
      event,
      from,
      to: (state as { value: string }).value,
      at: 0,
      ...(step.payload === undefined ? {} : { payload: step.payload }),
    });
  }
  return runes;
}

/** Maps the runes one after the other from a run started on the turn's state before them: every event, in order. */
function mapRunes(runes: readonly Rune[], start: TurnEngineState = turnEngine.initial({ agentId: 'a1' })): { run: AgUiRun; events: AGUIEvent[] } {
  const opened = startRun('t1', 'r1', start);
  let run = opened.run;
  const events = [...opened.events];
  for (const rune of runes) {
    const step = rune.machine === turnEngine.id ? turnRuneEvents(run, rune) : callRuneEvents(run, rune);
    run = step.run;
    events.push(...step.events);
  }
  return { run, events };
}

const types = (events: readonly AGUIEvent[]): string[] => events.map((event) => event.type);

describe('rune -> AG-UI events: the turn', () => {
  it("a text answer: snapshot, a delta per state change, one text message opened by the first delta, RUN_FINISHED success on the turn's last rune; an older log's turn_finalized after it adds nothing", () => {
    const turn = runesOf(turnEngine, agent.turn, { agentId: 'a1' }, [
      { type: 'start_turn', input: 'hi' },
      { type: 'assistant_delta', content: 'Hel' },
      { type: 'assistant_delta', content: '' },
      { type: 'assistant_delta', content: 'lo' },
      { type: 'response_done' },
      { type: 'turn_finalized' },
    ]).slice(1);
    const { run, events } = mapRunes(turn);
    expect(events).toEqual([
      { type: 'RUN_STARTED', threadId: 't1', runId: 'r1' },
      { type: 'STATE_SNAPSHOT', snapshot: { status: 'idle', turn: 0, calls: {} } },
      {
        type: 'STATE_DELTA',
        delta: [
          { op: 'replace', path: '/status', value: 'streaming' },
          { op: 'replace', path: '/turn', value: 1 },
        ],
      },
      { type: 'TEXT_MESSAGE_START', messageId: `${agent.turn}:3`, role: 'assistant' },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: `${agent.turn}:3`, delta: 'Hel' },
      { type: 'TEXT_MESSAGE_CONTENT', messageId: `${agent.turn}:3`, delta: 'lo' },
      { type: 'TEXT_MESSAGE_END', messageId: `${agent.turn}:3` },
      { type: 'STATE_DELTA', delta: [{ op: 'replace', path: '/status', value: 'idle' }] },
      { type: 'RUN_FINISHED', threadId: 't1', runId: 'r1', outcome: { type: 'success' } },
    ]);
    expect(run.done).toBe(true);
    // Nothing after the end.
    expect(turnRuneEvents(run, turn[1]!).events).toEqual([]);
  });

  it('an interrupted turn ends cancelled, its text message closed first', () => {
    const turn = runesOf(turnEngine, agent.turn, undefined, [
      { type: 'start_turn', input: 'hi' },
      { type: 'assistant_delta', content: 'Hel' },
      { type: 'interrupt', reason: 'stop' },
    ]).slice(1);
    const { events } = mapRunes(turn, turnEngine.initial());
    expect(types(events).slice(-3)).toEqual(['TEXT_MESSAGE_END', 'STATE_DELTA', 'RUN_FINISHED']);
    expect(events.at(-1)).toMatchObject({ outcome: { type: 'cancelled' } });
    expect(events.at(-2)).toMatchObject({
      delta: [
        { op: 'replace', path: '/status', value: 'idle' },
        { op: 'add', path: '/reason', value: 'stop' },
      ],
    });
  });

  it('a failed turn ends with RUN_ERROR carrying its error, and no RUN_FINISHED', () => {
    const turn = runesOf(turnEngine, agent.turn, undefined, [
      { type: 'start_turn', input: 'hi' },
      { type: 'stream_error', error: 'model down' },
    ]).slice(1);
    const { events } = mapRunes(turn, turnEngine.initial());
    expect(events.at(-1)).toEqual({ type: 'RUN_ERROR', message: 'model down', code: 'turn_error' });
    expect(types(events)).not.toContain('RUN_FINISHED');
  });
});

describe('rune -> AG-UI events: tool calls', () => {
  const input = { callId: 'c1', toolName: 'save_note', arguments: { text: 'milk' } };
  const started = (): AgUiRun => {
    const turn = runesOf(turnEngine, agent.turn, undefined, [
      { type: 'start_turn', input: 'note' },
      { type: 'assistant_delta', content: 'Saving.' },
      { type: 'tool_calls_received', callIds: ['c1'], calls: [input] },
    ]).slice(1);
    return mapRunes(turn, turnEngine.initial()).run;
  };

  it('the model asking for tools ends its text message; the call is START/ARGS/END under it, its result a TOOL_CALL_RESULT', () => {
    let run = started();
    expect(run.openMessageId).toBeUndefined();
    const call = runesOf(toolCall, agent.call('c1'), input, [
      { type: 'no_approval_needed' },
      { type: 'execution_claimed', claim: 'x' },
      { type: 'success', output: { saved: 'milk' } },
    ]);
    const events: AGUIEvent[] = [];
    for (const rune of call) {
      const step = callRuneEvents(run, rune);
      run = step.run;
      events.push(...step.events);
    }
    const toolEvents = events.filter((event) => event.type !== 'STATE_DELTA');
    expect(toolEvents).toEqual([
      { type: 'TOOL_CALL_START', toolCallId: 'c1', toolCallName: 'save_note', parentMessageId: `${agent.turn}:3` },
      { type: 'TOOL_CALL_ARGS', toolCallId: 'c1', delta: '{"text":"milk"}' },
      { type: 'TOOL_CALL_END', toolCallId: 'c1' },
      { type: 'TOOL_CALL_RESULT', messageId: `${agent.call('c1')}:result`, toolCallId: 'c1', role: 'tool', content: '{"status":"success","output":{"saved":"milk"}}' },
    ]);
    expect(run.state.calls).toEqual({ c1: { toolName: 'save_note', status: 'completed_result' } });
    expect(roundStatus(run.state, ['c1'])).toEqual({ type: 'done' });
  });

  it('a call awaiting approval, nothing else able to move: an interrupt {id: approval:<callId>, reason: tool_approval, toolCallId}', () => {
    let run = started();
    for (const rune of runesOf(toolCall, agent.call('c1'), input, [{ type: 'requires_approval' }])) run = callRuneEvents(run, rune).run;
    // A second call of the round, pending behind the first (serial tools): it cannot move either.
    for (const rune of runesOf(toolCall, agent.call('c2'), { ...input, callId: 'c2' }, [])) run = callRuneEvents(run, rune).run;
    const status = roundStatus(run.state, ['c1', 'c2']);
    expect(status).toEqual({
      type: 'interrupt',
      interrupts: [{ id: 'approval:c1', reason: 'tool_approval', toolCallId: 'c1', message: 'approve the call of tool "save_note"?' }],
    });
    const ended = interruptRun(run, status.type === 'interrupt' ? status.interrupts : []);
    expect(ended.run.done).toBe(true);
    expect(ended.events).toEqual([
      { type: 'RUN_FINISHED', threadId: 't1', runId: 'r1', outcome: { type: 'interrupt', interrupts: [expect.objectContaining({ id: 'approval:c1' })] } },
    ]);
  });

  it('the round is still running while a call executes, a first call is undecided, or a call is not created yet', () => {
    const state = (calls: Record<string, ToolCallState['value']>) => ({
      status: 'tool_executing' as const,
      turn: 1,
      calls: Object.fromEntries(Object.entries(calls).map(([id, status]) => [id, { toolName: 't', status }])),
    });
    expect(roundStatus(state({ c1: 'awaiting_approval', c2: 'executing' }), ['c1', 'c2'])).toEqual({ type: 'running' });
    expect(roundStatus(state({ c1: 'pending_call' }), ['c1'])).toEqual({ type: 'running' });
    expect(roundStatus(state({ c1: 'completed_result', c2: 'pending_call', c3: 'awaiting_approval' }), ['c1', 'c2', 'c3'])).toEqual({ type: 'running' });
    expect(roundStatus(state({ c1: 'awaiting_approval' }), ['c1', 'c2'])).toEqual({ type: 'running' });
    expect(roundStatus(state({ c1: 'denied', c2: 'awaiting_approval' }), ['c1', 'c2'])).toMatchObject({ type: 'interrupt' });
  });

  it('a denied call: TOOL_CALL_RESULT with status denied and the reason; progress is a CUSTOM tool_progress event', () => {
    let run = started();
    const call = runesOf(toolCall, agent.call('c1'), input, [{ type: 'requires_approval' }, { type: 'denied', reason: 'no' }]);
    const events = call.flatMap((rune) => {
      const step = callRuneEvents(run, rune);
      run = step.run;
      return step.events;
    });
    expect(events.find((event) => event.type === 'TOOL_CALL_RESULT')).toMatchObject({ toolCallId: 'c1', content: '{"status":"denied","reason":"no"}' });
    const progress = runesOf(toolCall, agent.call('c3'), { ...input, callId: 'c3' }, [{ type: 'no_approval_needed' }, { type: 'progress_update', chunk: '50%' }]).at(-1)!;
    expect(callRuneEvents(run, progress).events[0]).toEqual({ type: 'CUSTOM', name: 'tool_progress', value: { toolCallId: 'c3', chunk: '50%' } });
  });
});

describe('jsonPatch', () => {
  it('adds, removes, replaces and recurses into objects; equal values give no operation; keys are escaped', () => {
    expect(jsonPatch({ a: 1, b: { c: 1, d: 2 }, e: [1] }, { a: 1, b: { c: 2 }, e: [1, 2], 'f/~': true })).toEqual([
      { op: 'replace', path: '/b/c', value: 2 },
      { op: 'remove', path: '/b/d' },
      { op: 'replace', path: '/e', value: [1, 2] },
      { op: 'add', path: '/f~1~0', value: true },
    ]);
    expect(jsonPatch({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).toEqual([]);
    expect(jsonPatch(1, 'x')).toEqual([{ op: 'replace', path: '', value: 'x' }]);
  });
});
