import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lastValueFrom, take, toArray } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  agentLifecycle,
  autonomyLoop,
  conversation,
  createEngine,
  memoryStore,
  runePayloadSchemas,
  toolCall,
  turnEngine,
  type AnyMachine,
  type Engine,
  type Rune,
  type RuneStore,
  type TableMachine,
} from '../../src/index.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';

/** One stream's life: its machine, spawn input, events, and the (kind, payload) of each rune it appends, spawn first. */
interface Scenario {
  readonly stream: string;
  readonly machine: TableMachine<any, any, any, any>;
  readonly input?: unknown;
  readonly events: readonly object[];
  readonly runes: readonly (readonly [kind: string, payload: object | undefined])[];
}

const usage = { inputTokens: 12, outputTokens: 5 };
/** What an agent's turns used, as its lifecycle sums it: nothing yet. */
const noUsage = { inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, wallClockMs: 0 };
const turnUsed = { inputTokens: 3, outputTokens: 2, modelCalls: 1, toolCalls: 0, wallClockMs: 40 };

/** Every rune kind of seed 003's five machines, each at least once, with the payload its table gives. */
const scenarios: readonly Scenario[] = [
  {
    stream: 'conv/c1/agent/a1/turn',
    machine: turnEngine,
    input: { agentId: 'a1' },
    events: [
      { type: 'start_turn', input: 'list files' },
      { type: 'assistant_delta', content: 'Look' },
      { type: 'tool_calls_received', callIds: ['k1', 'k2'] },
      {
        type: 'tools_finished',
        more: true,
        resultSummaries: [
          { callId: 'k1', status: 'success' },
          { callId: 'k2', status: 'error' },
        ],
      },
      { type: 'assistant_delta', content: 'ing.' },
      { type: 'response_done', usage },
      { type: 'start_turn', input: 'again' },
      { type: 'assistant_delta', content: 'Par' },
      { type: 'interrupt', reason: 'user stop' },
      { type: 'start_turn', input: 'third' },
      { type: 'steer', input: 'be brief' },
      { type: 'start_turn', input: 'fourth' },
      { type: 'model_call_spent', usage: { inputTokens: 100 }, model: 'm1' },
      { type: 'stream_error', error: '503 upstream' },
      { type: 'start_turn', input: 'fifth' },
      { type: 'tool_calls_received', callIds: ['k3'] },
      { type: 'tool_crash', error: 'sandbox died' },
      { type: 'start_turn', input: 'sixth' },
      { type: 'assistant_delta', content: 'Done' },
      { type: 'tool_calls_received', callIds: ['k4'] },
      { type: 'tools_finished', more: false },
    ],
    runes: [
      ['spawned', undefined],
      ['turn.started', { turnId: '1', agentId: 'a1', input: 'list files' }],
      ['turn.assistant_delta', { content: 'Look' }],
      ['turn.tool_calls_received', { callIds: ['k1', 'k2'] }],
      [
        'turn.tools_finished',
        {
          callIds: ['k1', 'k2'],
          resultSummaries: [
            { callId: 'k1', status: 'success' },
            { callId: 'k2', status: 'error' },
          ],
        },
      ],
      ['turn.assistant_delta', { content: 'ing.' }],
      // The whole turn's usage: both model responses, the tool calls they asked for.
      ['turn.completed', { finalOutput: 'Looking.', usage: { inputTokens: 12, outputTokens: 5, modelCalls: 2, toolCalls: 2, wallClockMs: 0 }, messages: ['Look', 'ing.'] }],
      ['turn.started', { turnId: '2', agentId: 'a1', input: 'again' }],
      ['turn.assistant_delta', { content: 'Par' }],
      ['turn.interrupted', { reason: 'user stop', partialOutput: 'Par', usage: { inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, wallClockMs: 0 } }],
      ['turn.started', { turnId: '3', agentId: 'a1', input: 'third' }],
      [
        'turn.interrupted',
        { reason: 'steered', partialOutput: '', steerInput: 'be brief', usage: { inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, wallClockMs: 0 } },
      ],
      ['turn.started', { turnId: '4', agentId: 'a1', input: 'fourth' }],
      ['turn.model_call_spent', { usage: { inputTokens: 100 }, model: 'm1' }],
      // Each ending carries the turn's usage: here the empty answer fallen over from.
      ['turn.error', { errorType: 'stream_error', message: '503 upstream', usage: { inputTokens: 100, outputTokens: 0, modelCalls: 1, toolCalls: 0, wallClockMs: 0 } }],
      ['turn.started', { turnId: '5', agentId: 'a1', input: 'fifth' }],
      ['turn.tool_calls_received', { callIds: ['k3'] }],
      ['turn.error', { errorType: 'tool_crash', message: 'sandbox died', usage: { inputTokens: 0, outputTokens: 0, modelCalls: 1, toolCalls: 1, wallClockMs: 0 } }],
      ['turn.started', { turnId: '6', agentId: 'a1', input: 'sixth' }],
      ['turn.assistant_delta', { content: 'Done' }],
      ['turn.tool_calls_received', { callIds: ['k4'] }],
      ['turn.completed', { finalOutput: 'Done', usage: { inputTokens: 0, outputTokens: 0, modelCalls: 1, toolCalls: 1, wallClockMs: 0 }, messages: ['Done'] }],
    ],
  },
  ...(
    [
      [
        'k1',
        [
          { type: 'requires_approval', policyReason: 'writes files' },
          { type: 'approved', approver: 'ana' },
          { type: 'execution_claimed', claim: 'run-1' },
          { type: 'progress_update', chunk: 'a.txt\n' },
          { type: 'success', output: ['a.txt'] },
        ],
        [
          ['tool.approval_requested', { callId: 'k1', policyReason: 'writes files' }],
          ['tool.approved', { callId: 'k1', approver: 'ana' }],
          ['tool.claimed', { callId: 'k1', claim: 'run-1', attempt: 1 }],
          ['tool.progress', { callId: 'k1', chunk: 'a.txt\n' }],
          ['tool.result', { callId: 'k1', status: 'success', output: ['a.txt'] }],
        ],
      ],
      [
        'k2',
        [{ type: 'auto_approved' }, { type: 'execution_error', error: 'ENOENT' }],
        [
          ['tool.approved', { callId: 'k2' }],
          ['tool.result', { callId: 'k2', status: 'error', error: 'ENOENT' }],
        ],
      ],
      [
        'k3',
        [{ type: 'requires_approval' }, { type: 'denied', reason: 'no' }],
        [
          ['tool.approval_requested', { callId: 'k3' }],
          ['tool.denied', { callId: 'k3', reason: 'no' }],
        ],
      ],
      [
        'k4',
        [{ type: 'requires_approval' }, { type: 'approval_timeout' }],
        [
          ['tool.approval_requested', { callId: 'k4' }],
          ['tool.result', { callId: 'k4', status: 'timeout' }],
        ],
      ],
      [
        'k5',
        [{ type: 'no_approval_needed' }, { type: 'execution_timeout' }],
        [
          ['no_approval_needed', undefined],
          ['tool.result', { callId: 'k5', status: 'timeout' }],
        ],
      ],
      [
        'k6',
        [{ type: 'no_approval_needed' }, { type: 'cancelled', reason: 'turn interrupted' }],
        [
          ['no_approval_needed', undefined],
          ['tool.result', { callId: 'k6', status: 'cancelled', reason: 'turn interrupted' }],
        ],
      ],
    ] as const
  ).map(
    ([callId, events, runes]): Scenario => ({
      stream: `conv/c1/call/${callId}`,
      machine: toolCall,
      input: { callId, toolName: 'shell', arguments: { cmd: 'ls' } },
      events,
      runes: [['tool.call', { callId, toolName: 'shell', arguments: { cmd: 'ls' } }], ...runes],
    }),
  ),
  {
    // Its own conversation: closing it seals every stream under it, and the other scenarios run under conv/c1.
    stream: 'conv/c9',
    machine: conversation,
    input: { conversationId: 'c1', config: { budget: { tokens: 1000 } } },
    events: [
      { type: 'agent_ready', rootAgentId: 'a1' },
      { type: 'new_turn' },
      { type: 'turn_completed' },
      { type: 'pause_requested', reason: 'lunch' },
      { type: 'resume_requested' },
      { type: 'budget_exhausted', budgetInfo: { tokens: 1001 } },
      { type: 'budget_replenished' },
      { type: 'error_threshold', reason: '3 errors' },
      { type: 'reset' },
      { type: 'close_requested', reason: 'done' },
      { type: 'cleanup_complete', finalStats: { turns: 1 } },
      { type: 'archive_requested' },
    ],
    runes: [
      ['session.created', { conversationId: 'c1', config: { budget: { tokens: 1000 } } }],
      ['session.activated', { rootAgentId: 'a1' }],
      ['new_turn', undefined],
      ['turn_completed', undefined],
      ['session.paused', { reason: 'lunch' }],
      ['session.resumed', {}],
      ['session.suspended', { reason: 'budget_exhausted', budgetInfo: { tokens: 1001 } }],
      ['session.unsuspended', {}],
      ['session.suspended', { reason: '3 errors' }],
      ['session.unsuspended', {}],
      ['session.closing', { reason: 'done' }],
      ['session.closed', { finalStats: { turns: 1 } }],
      ['archive_requested', undefined],
    ],
  },
  {
    stream: 'conv/c1/agent/a2',
    machine: agentLifecycle,
    input: { agentId: 'a2', role: 'coder', model: 'scripted', parentId: 'a1' },
    events: [
      { type: 'init_complete' },
      { type: 'turn_assigned', turnId: '1' },
      { type: 'turn_completed', usage: turnUsed },
      { type: 'turn_assigned', turnId: '2' },
      { type: 'turn_interrupted', reason: 'steer' },
      { type: 'turn_assigned', turnId: '3' },
      { type: 'turn_error', error: 'rate limited' },
      { type: 'kill', stats: { turns: 3, toolCalls: 2 } },
    ],
    runes: [
      ['agent.spawning', { agentId: 'a2', role: 'coder', model: 'scripted', parentId: 'a1' }],
      ['agent.ready', { agentId: 'a2' }],
      ['turn.started', { agentId: 'a2', turnId: '1' }],
      ['turn.completed', { agentId: 'a2', turnId: '1' }],
      ['turn.started', { agentId: 'a2', turnId: '2' }],
      ['turn.interrupted', { agentId: 'a2', turnId: '2', reason: 'steer' }],
      ['turn.started', { agentId: 'a2', turnId: '3' }],
      ['turn.error', { agentId: 'a2', turnId: '3', message: 'rate limited' }],
      // The stats reported, with what its turns used (summed by the lifecycle).
      ['agent.terminated', { agentId: 'a2', reason: 'kill', stats: { turns: 3, toolCalls: 2, usage: turnUsed } }],
    ],
  },
  ...(
    [
      ['a3', { type: 'parent_closed' }, 'parent_closed'],
      ['a4', { type: 'budget_exhausted', stats: { turns: 1, toolCalls: 0 } }, 'budget_exhausted'],
    ] as const
  ).map(
    ([agentId, end, reason]): Scenario => ({
      stream: `conv/c1/agent/${agentId}`,
      machine: agentLifecycle,
      input: { agentId },
      events: [{ type: 'init_complete' }, end],
      runes: [
        ['agent.spawning', { agentId }],
        ['agent.ready', { agentId }],
        ['agent.terminated', { agentId, reason, stats: { ...('stats' in end ? end.stats : {}), usage: noUsage } }],
      ],
    }),
  ),
  {
    stream: 'conv/c1/agent/a5',
    machine: agentLifecycle,
    input: { agentId: 'a5' },
    events: [{ type: 'init_error', error: 'no such model' }],
    runes: [
      ['agent.spawning', { agentId: 'a5' }],
      ['agent.failed', { agentId: 'a5', error: 'no such model' }],
    ],
  },
  {
    stream: 'conv/c1/plan/p1',
    machine: autonomyLoop,
    input: { goal: 'ship v1' },
    events: [
      { type: 'decompose_goal', planId: 'p1', tasks: [{ id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' }] },
      { type: 'plan_rejected', changes: { add: 'tests' } },
      {
        type: 'decompose_goal',
        planId: 'p2',
        tasks: [
          { id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' },
          { id: 'test', description: 'test it', dependsOn: ['build'], priority: 0, ownerRole: 'dev' },
        ],
      },
      { type: 'auto_start' },
      { type: 'task_assigned', taskId: 'build', agentId: 'a2' },
      { type: 'task_started', taskId: 'build', turnNumber: 1 },
      { type: 'task_completed', taskId: 'build', outcome: 'success', result: 'built' },
      { type: 'task_assigned', taskId: 'test', agentId: 'a2' },
      { type: 'task_completed', taskId: 'test', outcome: 'failure', result: 'no tests' },
      { type: 'all_tasks_terminal' },
      { type: 'critique_found_issues', findings: ['no tests'], retry: ['test'] },
      { type: 'task_assigned', taskId: 'test', agentId: 'a2' },
      { type: 'task_completed', taskId: 'test', outcome: 'success', result: 'tested' },
      { type: 'all_tasks_terminal' },
      { type: 'critique_passed', summary: 'shipped' },
    ],
    runes: [
      ['plan.goal_received', { goalDescription: 'ship v1' }],
      ['plan.created', { planId: 'p1', tasks: [{ id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' }] }],
      ['plan.updated', { planId: 'p1', changes: { add: 'tests' } }],
      [
        'plan.created',
        {
          planId: 'p2',
          tasks: [
            { id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' },
            { id: 'test', description: 'test it', dependsOn: ['build'], priority: 0, ownerRole: 'dev' },
          ],
        },
      ],
      ['auto_start', undefined],
      ['plan.task_assigned', { taskId: 'build', agentId: 'a2' }],
      ['plan.task_started', { taskId: 'build', turnNumber: 1 }],
      ['plan.task_completed', { taskId: 'build', outcome: 'success', result: 'built' }],
      ['plan.task_assigned', { taskId: 'test', agentId: 'a2' }],
      ['plan.task_completed', { taskId: 'test', outcome: 'failure', result: 'no tests' }],
      ['all_tasks_terminal', undefined],
      ['plan.critique', { planId: 'p2', findings: ['no tests'], retry: ['test'] }],
      ['plan.task_assigned', { taskId: 'test', agentId: 'a2' }],
      ['plan.task_completed', { taskId: 'test', outcome: 'success', result: 'tested' }],
      ['all_tasks_terminal', undefined],
      ['plan.goal_met', { planId: 'p2', summary: 'shipped' }],
    ],
  },
  {
    stream: 'conv/c1/plan/p2',
    machine: autonomyLoop,
    input: { goal: 'tidy up' },
    events: [
      { type: 'decompose_goal', planId: 'p3', tasks: [{ id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' }] },
      { type: 'user_cancel' },
    ],
    runes: [
      ['plan.goal_received', { goalDescription: 'tidy up' }],
      ['plan.created', { planId: 'p3', tasks: [{ id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' }] }],
      ['plan.stopped', { reason: 'user_cancel' }],
    ],
  },
  {
    stream: 'conv/c1/plan/p3',
    machine: autonomyLoop,
    input: { goal: 'unblock' },
    events: [
      { type: 'answer_refused', question: 'plan@0', error: 'not JSON' },
      {
        type: 'decompose_goal',
        planId: 'p3',
        tasks: [
          { id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' },
          { id: 'test', description: 'test it', dependsOn: ['build'], priority: 0, ownerRole: 'dev' },
        ],
      },
      { type: 'auto_start' },
      { type: 'budget_started', usage: { inputTokens: 3, outputTokens: 4, modelCalls: 1, toolCalls: 0, wallClockMs: 0 } },
      { type: 'task_assigned', taskId: 'build', agentId: 'a1' },
      { type: 'task_completed', taskId: 'build', outcome: 'failure', result: 'broken' },
      { type: 'all_runnable_blocked' },
      { type: 'retry_task', taskId: 'build' },
      { type: 'unresolvable', reason: 'gave up' },
    ],
    runes: [
      ['plan.goal_received', { goalDescription: 'unblock' }],
      ['plan.answer_refused', { question: 'plan@0', attempt: 1, error: 'not JSON' }],
      [
        'plan.created',
        {
          planId: 'p3',
          tasks: [
            { id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' },
            { id: 'test', description: 'test it', dependsOn: ['build'], priority: 0, ownerRole: 'dev' },
          ],
        },
      ],
      ['auto_start', undefined],
      ['plan.budget_started', { usage: { inputTokens: 3, outputTokens: 4, modelCalls: 1, toolCalls: 0, wallClockMs: 0 } }],
      ['plan.task_assigned', { taskId: 'build', agentId: 'a1' }],
      ['plan.task_completed', { taskId: 'build', outcome: 'failure', result: 'broken' }],
      ['all_runnable_blocked', undefined],
      ['plan.task_retried', { taskId: 'build' }],
      ['plan.stopped', { reason: 'gave up' }],
    ],
  },
];

/** Runs every scenario on `engine`, checking each dispatch's rune as it is acknowledged. */
async function runScenarios(engine: Engine): Promise<void> {
  for (const { stream, machine, input, events, runes } of scenarios) {
    const spawned = await engine.spawn(stream, machine as AnyMachine, input);
    expect(spawned).toMatchObject({ accepted: true, rune: { kind: runes[0]![0] } });
    for (const [i, event] of events.entries()) {
      const result = await engine.dispatch(stream, event);
      expect(result, `${stream} ${JSON.stringify(event)}`).toMatchObject({ accepted: true, rune: { kind: runes[i + 1]![0] } });
    }
  }
}

/** Checks the stored runes against each scenario: kind, payload, and the payload's schema. */
async function expectStoredPayloads(store: RuneStore): Promise<void> {
  for (const { stream, machine, runes } of scenarios) {
    const stored: Rune[] = await store.read(stream);
    expect(
      stored.map((rune) => [rune.kind, rune.payload]),
      stream,
    ).toEqual(runes);
    const schemas = runePayloadSchemas(machine);
    for (const rune of stored) {
      if (Object.hasOwn(schemas, rune.kind)) expect(schemas[rune.kind].safeParse(rune.payload).error, `${stream} ${rune.kind}`).toBeUndefined();
      else expect(Object.hasOwn(rune, 'payload'), `${stream} ${rune.kind} has no payload`).toBe(false);
    }
  }
}

describe('the engine appends each rune with the payload seed 003 gives its kind', () => {
  it('covers every payload kind of the five seed-003 machines', () => {
    for (const machine of [turnEngine, toolCall, conversation, agentLifecycle, autonomyLoop] as TableMachine<any, any, any, any>[]) {
      const covered = new Set(scenarios.filter((s) => s.machine === machine).flatMap((s) => s.runes.map(([kind]) => kind)));
      for (const kind of Object.keys(runePayloadSchemas(machine))) expect(covered.has(kind), `${machine.id} ${kind}`).toBe(true);
    }
  });

  it('in memory: every rune, payload and schema as the table says', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    await runScenarios(engine);
    await expectStoredPayloads(store);
    await engine.close();
  });

  describe('on a SQLite file', () => {
    let dir: string;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'runestream-payloads-'));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    it('the payloads are durable: read back after the file is reopened', async () => {
      const path = join(dir, 'payloads.db');
      const engine = createEngine({ store: sqliteStore(path) });
      await runScenarios(engine);
      await engine.close();
      const store = sqliteStore(path);
      await expectStoredPayloads(store);
      await store.close();
    });
  });

  it('runes$ carries the payload live, as the dispatch resolved it', async () => {
    const engine = createEngine();
    await engine.spawn('call', toolCall, { callId: 'c9', toolName: 'ls', arguments: {} });
    const seen = lastValueFrom(engine.runes$('call').pipe(take(3), toArray()));
    await engine.dispatch('call', { type: 'no_approval_needed' });
    await engine.dispatch('call', { type: 'execution_error', error: 'EPERM' });
    expect((await seen).map((rune) => rune.payload)).toEqual([{ callId: 'c9', toolName: 'ls', arguments: {} }, undefined, { callId: 'c9', status: 'error', error: 'EPERM' }]);
    await engine.close();
  });
});
