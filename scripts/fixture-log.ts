/**
 * Writes a runestream log with today's code: the fixture that test/streams/fixture-log.test.ts
 * keeps readable, so a later change that makes an old log unreadable fails a test.
 *
 *     npx tsx scripts/fixture-log.ts test/fixtures/logs/main-<date>.db
 *
 * Offline and deterministic: every model is a `scriptedModel`, the engine's clock is a virtual one
 * that starts at {@link START} and moves only when this script says (a second between steps), the
 * claim ids are counted (`claimId`), and the steps run one after another. (The committed log of
 * 2026-11-27 was written before `agentEpics` took a `claimId`: its turn-based agents' claims are
 * random UUIDs.)
 *
 * One engine on one SQLite file runs, as the README's sections show them:
 * 1. "Conversations of several agents": `conv/team`, whose lead delegates a question to a
 *    researcher (who calls a tool), then asks for two tools that need approval: one approved and
 *    run, one denied. Budgets and prices are on ("Budgets"), so every response carries its usage
 *    and cost.
 * 2. "Autonomy loop": a plan `conv/team/plan/release` of two tasks run by a writer, to `goal_met`.
 * 3. "ReAct agents": `conv/team/agent/calc/react`, one tool call, claimed under a fixed id.
 * 4. "Chats that talk": `chat/lobby`, two messages (the first actor cancelled, a second spawned),
 *    answered through a provider chain whose primary fails: `provider/primary` is OPEN,
 *    `provider/backup` CLOSED ("The provider chain and its circuit breakers").
 * 5. "Agent CLI sessions": `session/fixture`, the fake CLI (test/fixtures/cli/fake-cli.mjs, a real
 *    child process) printing cline's NDJSON through `ndjsonCliAdapter`, to `completed`.
 *
 * `snapshotEvery: 10` leaves snapshots of the longer streams. The file is closed (checkpointed, no
 * -wal or -shm left) before the script prints what it holds. It refuses to overwrite a file.
 */
import { existsSync, rmSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { VirtualTimeScheduler, filter, firstValueFrom } from 'rxjs';
import { z } from 'zod';
import {
  agentEpics,
  agentCliSessions,
  autonomyEpics,
  chatTalk,
  defineTool,
  ndjsonCliAdapter,
  reactAgentEpics,
  scriptedModel,
  sendChatMessage,
  subAgentId,
  type ProviderChain,
} from '../src/agents.js';
import {
  agentStreams,
  chatActorLifecycle,
  createEngine,
  planStream,
  type AgentManagerSessionState,
  type AgentState,
  type AutonomyLoopState,
  type ChatActorState,
  type DispatchResult,
  type Rune,
  type TurnEngineState,
} from '../src/index.js';
import { sqliteStore } from '../src/sqlite.js';

/** When the log starts, in the engine's (virtual) time: the day this fixture was first written. */
export const START = Date.UTC(2026, 10, 27, 9, 0, 0);
/** How far the clock moves between two steps of the script. */
const STEP_MS = 1_000;
/** How long (real time) one step may take before the script gives up, naming the step. */
const STEP_DEADLINE_MS = 30_000;
const FAKE_CLI = fileURLToPath(new URL('../test/fixtures/cli/fake-cli.mjs', import.meta.url));
const USER = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

/** A virtual clock that moves only when told: `step()` runs what is due and moves on by `STEP_MS`. */
class StepClock extends VirtualTimeScheduler {
  constructor(start: number) {
    super();
    this.frame = start;
  }

  step(ms = STEP_MS): void {
    const to = this.frame + ms;
    this.maxFrames = to;
    this.flush();
    this.frame = to;
  }
}

const fail = (what: string): never => {
  process.stderr.write(`fixture-log: ${what}\n`);
  process.exit(1);
};

const [out] = process.argv.slice(2);
if (out === undefined) fail('usage: npx tsx scripts/fixture-log.ts <out.db>');
const path = out!;
if (existsSync(path)) fail(`${path} exists: remove it first (this script never overwrites a log)`);

// Tools: the researcher's lookup, and the lead's two tools that need a person's approval.
const notes: string[] = [];
const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a fact up in the release calendar.',
  inputSchema: z.object({ query: z.string() }),
  parallelSafe: true,
  execute: ({ query }) => ({ query, answer: 'v2 ships on 27 November' }),
});
const saveNote = defineTool({
  name: 'save_note',
  description: 'Saves a note for the team.',
  inputSchema: z.object({ text: z.string() }),
  needsApproval: true,
  execute: ({ text }) => {
    notes.push(text);
    return { saved: text };
  },
});
const deleteNotes = defineTool({
  name: 'delete_notes',
  description: "Deletes every one of the team's notes.",
  inputSchema: z.object({ confirm: z.boolean() }),
  needsApproval: true,
  execute: () => fail('delete_notes ran, but its call was to be denied'),
});
const add = defineTool({
  name: 'add',
  description: 'Adds two numbers.',
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

// Models: one scripted model per role, each called in a known order.
const usage = { inputTokens: 120, outputTokens: 12 };
const lead = scriptedModel(
  [
    { text: 'Let me ask the researcher.', toolCalls: [{ toolName: 'delegate', input: { role: 'researcher', task: 'When does v2 ship?' }, toolCallId: 'd1' }], usage },
    {
      text: ' I will note it, and tidy up.',
      toolCalls: [
        { toolName: 'save_note', input: { text: 'v2 ships on 27 November' }, toolCallId: 'n1' },
        { toolName: 'delete_notes', input: { confirm: true }, toolCallId: 'n2' },
      ],
      usage,
    },
    { text: ' v2 ships on 27 November; noted (the deletion was denied).', usage },
  ],
  { modelId: 'lead-model' },
);
const researcher = scriptedModel(
  [
    { toolCalls: [{ toolName: 'lookup', input: { query: 'v2 release date' }, toolCallId: 'l1' }], usage },
    { text: '27 November', usage },
  ],
  { modelId: 'researcher-model' },
);
const writer = scriptedModel(
  [
    { text: 'Notes drafted.', usage },
    { text: 'Notes checked.', usage },
  ],
  { modelId: 'writer-model' },
);
const tasks = [
  { id: 'draft', description: 'Draft the release notes', ownerRole: 'writer' },
  { id: 'check', description: 'Check the notes', dependsOn: ['draft'], ownerRole: 'writer', priority: 1 },
];
const planner = scriptedModel([{ text: JSON.stringify({ tasks }), usage }], { modelId: 'planner-model' });
const critic = scriptedModel([{ text: '{"verdict":"pass","summary":"notes ready"}', usage }], { modelId: 'critic-model' });
const calculator = scriptedModel(
  [
    { toolCalls: [{ toolName: 'add', input: { a: 2, b: 3 }, toolCallId: 'r1' }], usage },
    { text: 'It is 5.', usage },
  ],
  {
    modelId: 'react-model',
  },
);
// The chat's agent has no role: it gets the default model, a chain whose primary is down.
const chain: ProviderChain = {
  providers: [
    { name: 'primary', model: scriptedModel([{ error: 'HTTP 503: overloaded' }], { modelId: 'primary-model' }), breaker: { failureThreshold: 1 } },
    {
      name: 'backup',
      breaker: { failureThreshold: 1 },
      model: scriptedModel(
        [
          { text: 'Hello!', usage },
          { text: 'You said hi, then this.', usage },
        ],
        { modelId: 'backup-model' },
      ),
    },
  ],
};
const prices = Object.fromEntries(
  ['lead-model', 'researcher-model', 'writer-model', 'planner-model', 'critic-model', 'react-model', 'backup-model'].map((id) => [
    id,
    { inputPerMillion: 3, outputPerMillion: 15 },
  ]),
);

let reactClaims = 0;
let agentClaims = 0;
const clock = new StepClock(START);
const engine = createEngine({
  store: sqliteStore(path),
  scheduler: clock,
  snapshotEvery: 10,
  epics: [
    ...agentEpics({
      model: chain,
      tools: [lookup, saveNote, deleteNotes],
      agents: {
        lead: { model: lead, tools: [saveNote, deleteNotes], system: 'You lead the release team.' },
        researcher: { model: researcher, tools: [lookup], description: 'looks things up' },
        writer: { model: writer, tools: [], description: 'writes release notes' },
      },
      delegation: { maxDepth: 2, maxAgents: 8 },
      budget: { toolCalls: 10 },
      conversationBudget: { modelCalls: 50 },
      prices,
      claimId: () => `agent-claim-${++agentClaims}`,
    }),
    ...autonomyEpics({ planner, critic, autoStart: true, parallelism: 1 }),
    ...reactAgentEpics({ model: calculator, tools: [add], breakers: false, claimId: () => `react-claim-${++reactClaims}` }),
    chatActorLifecycle(),
    chatTalk(),
    agentCliSessions({ clis: { fake: { adapter: ndjsonCliAdapter, command: process.execPath, args: [FAKE_CLI], cwd: process.cwd() } }, defaultCli: 'fake' }),
  ],
});
engine.errors$.subscribe((error) => fail(`engine error: ${JSON.stringify(error, (_key, value: unknown) => (value instanceof Error ? value.message : value))}`));

/** Waits for `promise`, failing the script (naming `what`) if it takes longer than a step may. */
async function step<T>(what: string, promise: Promise<T>): Promise<T> {
  let deadline: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    deadline = setTimeout(() => reject(new Error(`${what}: not within ${STEP_DEADLINE_MS} ms`)), STEP_DEADLINE_MS);
  });
  try {
    return await Promise.race([promise, late]);
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  } finally {
    clearTimeout(deadline);
  }
}
const accepted = async (what: string, result: Promise<DispatchResult>): Promise<void> => {
  const done = await step(what, result);
  if (!done.accepted) fail(`${what} refused: ${done.code}: ${done.reason}`);
};
/** The first live rune of `stream` that matches: subscribe before what makes it. */
const runeOf = (stream: string, match: (rune: Rune) => boolean): Promise<Rune> =>
  firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === stream && match(rune))));
/** The first state of `stream` (its current one included) that matches. */
const stateOf = <S>(stream: string, match: (state: S) => boolean): Promise<S> => firstValueFrom(engine.state$<S>(stream).pipe(filter(match)));
const turnDone = (stream: string, n: number) => stateOf<TurnEngineState>(stream, (s) => s.value === 'idle' && s.turn === n);

// 1. A conversation of several agents: the lead delegates, then one tool approved, one denied.
const leadAgent = agentStreams('conv/team', 'lead');
const researcherAgent = agentStreams('conv/team', subAgentId('lead', 'd1'));
await accepted('spawn the lead', engine.spawn(leadAgent.lifecycle, 'agent-lifecycle', { agentId: 'lead', role: 'lead' }));
await accepted('spawn the lead turn', engine.spawn(leadAgent.turn, 'turn-engine', { agentId: 'lead' }));
const delegated = runeOf(leadAgent.call('d1'), (rune) => rune.kind === 'tool.result');
const saveAsked = runeOf(leadAgent.call('n1'), (rune) => rune.kind === 'tool.approval_requested');
const deleteAsked = runeOf(leadAgent.call('n2'), (rune) => rune.kind === 'tool.approval_requested');
clock.step();
await accepted('start the lead turn', engine.dispatch(leadAgent.turn, { type: 'start_turn', input: 'When does v2 ship? Note it down.' }));
await step('the delegation', delegated);
await step('the save_note approval request', saveAsked);
clock.step();
await accepted('approve save_note', engine.dispatch(leadAgent.call('n1'), { type: 'approved', approver: 'ann' }));
await step('the delete_notes approval request', deleteAsked);
clock.step();
await accepted('deny delete_notes', engine.dispatch(leadAgent.call('n2'), { type: 'denied', reason: 'keep the notes' }));
const leadTurn = await step("the lead's turn", turnDone(leadAgent.turn, 1));
if (notes.join() !== 'v2 ships on 27 November') fail(`save_note ran ${notes.length} times`);
await step("the researcher's turn", turnDone(researcherAgent.turn, 1));

// 2. An autonomy plan in the same conversation, to goal_met.
const plan = planStream('team', 'release');
clock.step();
await accepted('spawn the plan', engine.spawn(plan, 'autonomy-loop', { goal: 'Release notes for v2' }));
const planDone = await step(
  'the plan',
  stateOf<AutonomyLoopState>(plan, (s) => s.value === 'goal_met' || s.value === 'stopped'),
);
if (planDone.value !== 'goal_met') fail(`the plan ended ${planDone.value}: ${JSON.stringify(planDone)}`);

// 3. A ReAct agent in the same conversation, with one tool call.
const react = agentStreams('conv/team', 'calc').react;
clock.step();
await accepted('spawn the ReAct agent', engine.spawn(react, 'react-agent'));
const reacted = stateOf<AgentState>(react, (s) => s.reActContext === null && s.messages.some((m) => m.role === 'assistant' && m.content === 'It is 5.'));
await accepted('message the ReAct agent', engine.dispatch(react, { type: 'user-message-received', messageId: 'm1', content: '2 + 3?', timestamp: clock.now() }));
await step('the ReAct loop', reacted);

// 4. A chat that talks: two messages, the first actor cancelled in between; the provider chain's primary fails.
clock.step();
const first = await step('the first chat message', sendChatMessage(engine, 'lobby', { userId: USER, message: 'hi' }));
await step(
  'the first answer',
  stateOf<ChatActorState>(first.actor, (s) => s.value === 'idle'),
);
clock.step();
await accepted('cancel the first actor', engine.dispatch(first.actor, { type: 'Cancel', reason: 'user_cancelled' }));
clock.step();
const second = await step('the second chat message', sendChatMessage(engine, 'lobby', { userId: USER, message: 'and now?' }));
await step(
  'the second answer',
  stateOf<ChatActorState>(second.actor, (s) => s.value === 'idle'),
);

// 5. An agent CLI session: the fake CLI prints cline's NDJSON (the adapter puts the prompt last, where the fake reads its steps).
const session = 'session/fixture';
const cliSteps = [
  { json: { type: 'task_started', taskId: 'task-1' } },
  { json: { ts: 1, type: 'say', say: 'api_req_started' } },
  { json: { ts: 2, type: 'say', say: 'text', text: 'Reading README.md' } },
  { json: { ts: 3, type: 'ask', ask: 'tool', text: '{"tool":"readFile","path":"README.md"}' } },
  { json: { ts: 4, type: 'say', say: 'completion_result', text: 'Done.' } },
  { exit: 0 },
];
clock.step();
await accepted('spawn the CLI session', engine.spawn(session, 'agent-manager-session', { cli: 'fake', autoApprove: true }));
const cliDone = stateOf<AgentManagerSessionState>(session, (s) => s.value === 'completed' || s.value === 'error');
await accepted('start the CLI session', engine.dispatch(session, { type: 'start_session', prompt: JSON.stringify(cliSteps) }));
const cli = await step('the CLI session', cliDone);
if (cli.value !== 'completed') fail(`the CLI session ended ${cli.value}: ${JSON.stringify(cli)}`);

await engine.close(); // closes the store: its WAL is checkpointed into the file and removed
if (existsSync(`${path}-wal`)) fail(`${path}-wal was left after close`);
// The store's check at open reads the file through a read-only connection, whose shared-memory
// index SQLite leaves behind: with the WAL gone it indexes nothing, and the file is whole without it.
rmSync(`${path}-shm`, { force: true });
process.stdout.write(`fixture-log: wrote ${path} (${statSync(path).size} bytes): the lead answered "${leadTurn.output}"\n`);
