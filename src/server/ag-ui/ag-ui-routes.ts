import type { ServerResponse } from 'node:http';
import { EventEncoder } from '@ag-ui/encoder';
import { firstValueFrom } from 'rxjs';
import { errorText } from '../../reducers/error-text.js';
import { agentStreams, conversationStream, isSegment, type AgentStreams } from '../../reducers/stream-ids.js';
import type { ToolCallState } from '../../reducers/tool-call/schema.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import type { DispatchOptions, Engine } from '../../streams/engine.js';
import { askAuthorize, clientOriginOf, type Authorize, type Identity } from '../access.js';
import { replyError } from '../http-reply.js';
import { startEventStream } from '../sse.js';
import type { Route, RouteContext } from '../routes.js';
import { APPROVAL_INTERRUPT_PREFIX } from './ag-ui-events.js';
import { agUiRun$, latestTurnStart, type AgUiRunCall, type AgUiRunStart } from './ag-ui-run.js';
import { newUserInput, parseRunInput, type AgUiResumeEntry, type AgUiRunInput } from './ag-ui-request.js';

/** An agent answering AG-UI: its turns run under its role's profile (`agentEpics({ agents })`), or the defaults without one. */
export interface AgUiAgent {
  readonly role?: string;
}

/** Options of {@link agUiRoutes}. */
export interface AgUiRoutesOptions {
  readonly engine: Engine;
  /**
   * The agents that answer, by id (the `:agent` of the path): a record, or a function asked at
   * each request (agents that come and go: `runestream serve` answers for every live role of its
   * `agentProfiles`, the registry's included, as `{ role }`). Any other id is 404 `unknown_agent`.
   */
  readonly agents: Readonly<Record<string, AgUiAgent>> | ((agentId: string) => AgUiAgent | undefined);
  /**
   * The server's authorization hook (give the one passed to `createServer`): a run needs
   * `'drive'` on the agent's turn stream (`conv/<threadId>/agent/<agent>/turn`), and a resume
   * `'approve'` (details `{event: 'approved' | 'denied'}`) on each call it answers; the approval
   * records the identity's id as its approver. Default: every request the server lets in may.
   */
  readonly authorize?: Authorize;
  /** A client that lets more than this many bytes of events pile up is disconnected (its run goes on; it may rejoin). Default 1 MiB. */
  readonly maxBufferedBytes?: number;
}

/** A request refused before its run starts. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The AG-UI 1.0 endpoint of each agent, for `createServer({ routes })` (`runestream serve` adds
 * it for every configured agent): `POST /agents/:agent/ag-ui`, a `RunAgentInput` in (JSON),
 * the run's events out (SSE, `data: <event JSON>`). `threadId` is the conversation
 * (`conv/<threadId>`) and the agent's streams are `conv/<threadId>/agent/<agent>/...`; a run is
 * one turn of the agent.
 *
 * 1. New user messages (those after the conversation's last message of another role) start a
 *    turn with their text: `RUN_STARTED`, `STATE_SNAPSHOT`, the turn's text and tool calls,
 *    `STATE_DELTA`s, and `RUN_FINISHED` (`success`, or `cancelled` for an interrupted turn) or
 *    `RUN_ERROR` (see `agUiRun$`). The agent's streams are created on its first run.
 * 2. A call that needs approval ends the run with outcome `interrupt`:
 *    `{id: 'approval:<callId>', reason: 'tool_approval', toolCallId}`. The next run's `resume`
 *    answers it: `resolved` with payload `{approved: true}` approves the call, anything else
 *    (`{approved: false}`, `cancelled`) denies it; the run then follows the turn on. An interrupt
 *    answered already is not answered again (the call's machine takes one answer), so a resume
 *    sent twice is harmless.
 * 3. No new message and no resume: a rejoin. The agent's latest run is replayed from the log and
 *    followed live until it ends (a client that went away lost nothing: the turn is not stopped
 *    by a closed connection).
 * 4. Refusals (`{ok: false, code, message}`): 400 `invalid_json` or `invalid_message` (the body,
 *    naming each field), or the engine's code for a message it refuses (`invalid_string`, a limit's), 403 `forbidden` (no `'drive'` on the turn stream, or no `'approve'` on
 *    a call a resume answers: then no answer is sent), 404 `unknown_agent`,
 *    409 `unknown_interrupt` (a resume naming no approval of this agent on this thread),
 *    `run_in_progress` (new messages while a turn runs), `no_run` (a rejoin with no turn yet).
 */
export function agUiRoutes(options: AgUiRoutesOptions): Route[] {
  const { engine, agents, authorize = () => true, maxBufferedBytes = 1 << 20 } = options;
  const handler = async (_req: unknown, res: ServerResponse, { params, body, access }: RouteContext): Promise<void> => {
    const agentId = params.agent!;
    const agent = isSegment(agentId) ? agentOf(agents, agentId) : undefined;
    if (agent === undefined) return replyError(res, 404, 'unknown_agent', `no agent "${agentId}"${agentList(agents)}`);
    const parsed = parseRunInput(body);
    if (!parsed.ok) return replyError(res, 400, parsed.code, parsed.message);
    const { input } = parsed;
    const streams = agentStreams(conversationStream(input.threadId), agentId);
    const allowed = await askAuthorize(authorize, access, streams.turn, 'drive');
    if (allowed === 'failed') return replyError(res, 500, 'internal', `the authorization hook failed for stream "${streams.turn}"`);
    if (!allowed) return replyError(res, 403, 'forbidden', `not allowed to drive stream "${streams.turn}"`);
    // Answering an approval is the `approve` action on the call's stream, asked before any answer is sent.
    const mayApprove = async (stream: string, event: string): Promise<void> => {
      const answer = await askAuthorize(authorize, access, stream, 'approve', { event });
      if (answer === 'failed') throw new Refusal(500, 'internal', `the authorization hook failed for stream "${stream}"`);
      if (!answer) throw new Refusal(403, 'forbidden', `not allowed to approve stream "${stream}"`);
    };
    let start: AgUiRunStart;
    try {
      start = await runStart(engine, streams, agent, input, access.identity, mayApprove);
    } catch (error) {
      if (error instanceof Refusal) return replyError(res, error.status, error.code, error.message);
      return replyError(res, 500, 'internal', `agent "${agentId}" on thread "${input.threadId}": ${errorText(error)}`);
    }
    if (res.destroyed) return; // the client left; the turn goes on
    const encoder = new EventEncoder();
    startEventStream(res, encoder.getContentType());
    const subscription = agUiRun$(start).subscribe({
      next: (event) => {
        if (res.writableEnded) return;
        res.write(encoder.encodeSSE(event));
        if (res.writableLength > maxBufferedBytes) res.destroy();
      },
      error: () => res.destroy(),
      complete: () => res.end(),
    });
    res.once('close', () => subscription.unsubscribe());
  };
  return [{ method: 'POST', path: '/agents/:agent/ag-ui', handler }];
}

/** The agent of an id, from a record or a function. */
const agentOf = (agents: AgUiRoutesOptions['agents'], agentId: string): AgUiAgent | undefined =>
  typeof agents === 'function' ? agents(agentId) : Object.hasOwn(agents, agentId) ? agents[agentId] : undefined;

/** `; the agents are "a", "b"` for a record of agents (a function cannot list them). */
const agentList = (agents: AgUiRoutesOptions['agents']): string =>
  typeof agents === 'function'
    ? ''
    : `; the agents are ${Object.keys(agents)
        .map((id) => `"${id}"`)
        .join(', ')}`;

/** Where the request's run starts: a new turn, a resume, or a rejoin of the latest run. */
async function runStart(
  engine: Engine,
  streams: AgentStreams,
  agent: AgUiAgent,
  input: AgUiRunInput,
  identity: Identity,
  mayApprove: (stream: string, event: string) => Promise<void>,
): Promise<AgUiRunStart> {
  const approver = identity.id;
  const { threadId, runId } = input;
  const base = { engine, agent: streams, threadId, runId };
  // Every rune the request writes records it as the identity's.
  const asClient = { origin: clientOriginOf(identity) };
  if (input.resume !== undefined && input.resume.length > 0) return { ...base, ...(await resume(engine, streams, input.resume, threadId, approver, asClient, mayApprove)) };
  const text = newUserInput(input.messages);
  const head = await engine.snapshot<TurnEngineState>(streams.turn);
  if (text === undefined) {
    const latest = head === undefined ? undefined : await firstValueFrom(latestTurnStart(engine, streams.turn, head.seq));
    if (latest === undefined) throw new Refusal(409, 'no_run', `agent "${streams.agentId}" has no run on thread "${threadId}" to rejoin; send a user message to start one`);
    return { ...base, ...latest };
  }
  const now = head ?? (await spawnAgent(engine, streams, agent, asClient));
  if (now.state.value !== 'idle') {
    throw new Refusal(
      409,
      'run_in_progress',
      `agent "${streams.agentId}" on thread "${threadId}" is running turn ${now.state.turn} (${now.state.value}); rejoin it with no new message, or send yours once it ends`,
    );
  }
  const started = await engine.dispatch(streams.turn, { type: 'start_turn', input: text }, asClient);
  if (!started.accepted) {
    // The message itself refused (a NUL, a string over the limits): 400 with the engine's code.
    if (started.code !== 'sealed' && started.code !== 'held' && started.code !== 'not_allowed' && started.code !== 'terminal_state')
      throw new Refusal(400, started.code, started.reason);
    // Sealed (closed) or held (paused): the conversation's state, said as it is.
    throw new Refusal(409, started.code === 'sealed' || started.code === 'held' ? started.code : 'run_in_progress', started.reason);
  }
  return { ...base, seq: now.seq, state: now.state };
}

/** Creates the agent's streams on its first run (its lifecycle with its role first, then its turn stream), and returns the turn's state. */
async function spawnAgent(engine: Engine, streams: AgentStreams, agent: AgUiAgent, asClient: DispatchOptions): Promise<{ seq: number; state: TurnEngineState }> {
  if (agent.role !== undefined && (await engine.snapshot(streams.lifecycle)) === undefined) {
    await engine.spawn(streams.lifecycle, 'agent-lifecycle', { agentId: streams.agentId, role: agent.role }, asClient);
  }
  const spawned = await engine.spawn(streams.turn, 'turn-engine', { agentId: streams.agentId }, asClient);
  if (!spawned.accepted && spawned.code !== 'stream_exists') throw new Refusal(409, spawned.code, spawned.reason);
  const head = await engine.snapshot<TurnEngineState>(streams.turn);
  if (head === undefined) throw new Error(`stream "${streams.turn}" was not created`);
  return head;
}

/** An answer's decision: `resolved` with `{approved: true}` approves; anything else denies. */
const approves = (entry: AgUiResumeEntry): boolean => entry.status === 'resolved' && (entry.payload as { approved?: unknown } | undefined)?.approved === true;

/**
 * Answers the interrupts the resume names, after checking every one names an approval of this
 * agent on this thread; the run starts from the turn and its round's calls as they were just
 * before the answers, so the answers are among what it follows.
 */
async function resume(
  engine: Engine,
  streams: AgentStreams,
  entries: readonly AgUiResumeEntry[],
  threadId: string,
  approver: string,
  asClient: DispatchOptions,
  mayApprove: (stream: string, event: string) => Promise<void>,
): Promise<Pick<AgUiRunStart, 'seq' | 'state' | 'calls'>> {
  const head = await engine.snapshot<TurnEngineState>(streams.turn);
  const answers: { entry: AgUiResumeEntry; call: AgUiRunCall; stream: string }[] = [];
  for (const entry of entries) {
    const callId = entry.interruptId.startsWith(APPROVAL_INTERRUPT_PREFIX) ? entry.interruptId.slice(APPROVAL_INTERRUPT_PREFIX.length) : '';
    const stream = isSegment(callId) ? streams.call(callId) : undefined;
    const call = stream === undefined ? undefined : await callOf(engine, stream);
    if (head === undefined || call === undefined || engine.machineOf(stream!) !== 'tool-call') {
      throw new Refusal(
        409,
        'unknown_interrupt',
        `no interrupt "${entry.interruptId}" of agent "${streams.agentId}" on thread "${threadId}": interrupts are "approval:<callId>" of its tool calls`,
      );
    }
    await mayApprove(stream!, approves(entry) ? 'approved' : 'denied');
    answers.push({ entry, call, stream: stream! });
  }
  const calls = head!.state.value === 'tool_executing' ? await Promise.all(head!.state.callIds.map((callId) => callOf(engine, streams.call(callId)))) : [];
  for (const { entry, call, stream } of answers) {
    // An interrupt answered already keeps its answer: the machine takes one.
    if (call.state.value !== 'awaiting_approval') continue;
    await engine.dispatch(
      stream,
      approves(entry) ? { type: 'approved', approver } : { type: 'denied', reason: entry.status === 'cancelled' ? 'cancelled' : 'denied by the user' },
      asClient,
    );
  }
  return { seq: head!.seq, state: head!.state, calls: calls.flatMap((call) => (call === undefined ? [] : [call])) };
}

const callOf = async (engine: Engine, stream: string): Promise<AgUiRunCall | undefined> => {
  const call = await engine.snapshot<ToolCallState>(stream);
  return call === undefined ? undefined : { seq: call.seq, state: call.state };
};
