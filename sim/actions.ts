import { sendChatMessage } from '../src/effects/chat-talk.js';
import type { Rune } from '../src/reducers/rune.js';
import { agentStreams, parseStreamId, planStream } from '../src/reducers/stream-ids.js';
import type { DispatchResult } from '../src/streams/engine.js';
import { rootTag } from './fake-llm.js';
import type { Random } from './random.js';
import type { World } from './world.js';

/**
 * What clients do, drawn from the seed and from what the log shows now: messages, approvals (in
 * time, late, or of calls that never asked), denials, cancels, pauses, steers, closes, plans,
 * malformed and out-of-order events; and what the world does to itself: time passing, clock jumps,
 * crashes.
 */

/** What the log says of each stream: its machine and its state name (finite machines). */
export class LogView {
  readonly machine = new Map<string, string>();
  readonly value = new Map<string, string>();

  see(rune: Rune): void {
    this.machine.set(rune.stream, rune.machine);
    if (rune.to !== undefined) this.value.set(rune.stream, rune.to);
  }

  /** The streams of a machine, in the order they were first seen, optionally in one of `states`. */
  streams(machine: string, states?: readonly string[]): string[] {
    const out: string[] = [];
    for (const [stream, id] of this.machine) if (id === machine && (states === undefined || states.includes(this.value.get(stream) ?? ''))) out.push(stream);
    return out;
  }
}

/** One action of a step, as the failure report prints it. */
export interface ActionRecord {
  readonly kind: string;
  readonly stream?: string;
  readonly event?: unknown;
  /** The engine's answer: accepted, or the rejection's code. */
  outcome?: string;
  /** A rejection the action expected (bad input): its code must be one of these. */
  readonly expectRejection?: readonly string[];
}

/** Whether the action was a client's (liveness is judged from the last one) or the world's own. */
export type ActionSource = 'client' | 'world';

export interface Action {
  readonly kind: string;
  readonly source: ActionSource;
  run(world: World, view: LogView, random: Random): Promise<ActionRecord>;
}

const USER = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

/** The outcome of a dispatch, as a record's `outcome`. */
const outcomeOf = (result: DispatchResult): string => (result.accepted ? 'accepted' : `rejected ${result.code}`);

const dispatch = async (world: World, kind: string, stream: string, event: unknown, expectRejection?: readonly string[]): Promise<ActionRecord> => {
  const result = await world.client.dispatch(stream, event);
  return { kind, stream, event, outcome: outcomeOf(result), ...(expectRejection === undefined ? {} : { expectRejection }) };
};

/** The first id `<prefix><n>` no stream of the log uses yet, as a conversation or a chat. */
const nextId = (view: LogView, prefix: string): string => {
  const used = (id: string): boolean => {
    for (const stream of view.machine.keys())
      if (stream === `conv/${id}` || stream === `chat/${id}` || stream.startsWith(`conv/${id}/`) || stream.startsWith(`chat/${id}/`)) return true;
    return false;
  };
  for (let n = 1; ; n++) if (!used(`${prefix}${n}`)) return `${prefix}${n}`;
};

/** The conversation roots the simulation started (`conv/<c>`). */
const conversations = (view: LogView): string[] => view.streams('conversation').filter((stream) => stream.startsWith('conv/'));

const actions: Record<string, Action> = {
  conversation: {
    kind: 'conversation',
    source: 'client',
    async run(world, view, random) {
      const root = `conv/${nextId(view, 'c')}`;
      const agent = agentStreams(root, 'root');
      await world.client.spawn(agent.lifecycle, 'agent-lifecycle', { agentId: 'root', role: random.pick(['lead', 'helper']) });
      await world.client.spawn(agent.turn, 'turn-engine', { agentId: 'root' });
      return dispatch(world, 'conversation', agent.turn, { type: 'start_turn', input: `Please help ${rootTag(root)}` });
    },
  },
  message: {
    kind: 'message',
    source: 'client',
    async run(world, view, random) {
      const turns = view.streams('turn-engine');
      if (turns.length === 0) return { kind: 'message (none)' };
      const turn = random.pick(turns);
      const root = parseStreamId(turn)!.root;
      return dispatch(world, 'message', turn, { type: 'start_turn', input: `And then? ${rootTag(root)}` });
    },
  },
  chat: {
    kind: 'chat',
    source: 'client',
    async run(world, view, random) {
      const chats = view.streams('conversation').filter((stream) => stream.startsWith('chat/'));
      const id = chats.length === 0 || random.chance(0.3) ? nextId(view, 'h') : random.pick(chats).slice('chat/'.length);
      const sent = await sendChatMessage(world.client, id, { userId: USER, message: `Hello ${rootTag(`chat/${id}`)}` });
      return { kind: 'chat', stream: sent.actor, outcome: sent.accepted ? 'accepted' : `rejected ${sent.code}` };
    },
  },
  approve: {
    kind: 'approve',
    source: 'client',
    async run(world, view, random) {
      const waiting = view.streams('tool-call', ['awaiting_approval']);
      if (waiting.length === 0) return { kind: 'approve (none waiting)' };
      const call = random.pick(waiting);
      return random.chance(0.75)
        ? dispatch(world, 'approve', call, { type: 'approved', approver: 'sim' })
        : dispatch(world, 'deny', call, { type: 'denied', reason: 'not now' });
    },
  },
  cancelCall: {
    kind: 'cancel call',
    source: 'client',
    async run(world, view, random) {
      const open = view.streams('tool-call', ['awaiting_approval', 'executing']);
      if (open.length === 0) return { kind: 'cancel call (none open)' };
      return dispatch(world, 'cancel call', random.pick(open), { type: 'cancelled', reason: 'user cancelled the call' });
    },
  },
  lateApproval: {
    kind: 'late approval',
    source: 'client',
    async run(world, view, random) {
      const ended = view.streams('tool-call', ['denied', 'completed_result', 'error_result', 'timeout_result', 'cancelled_result', 'executing']);
      if (ended.length === 0) return { kind: 'late approval (none)' };
      return dispatch(world, 'late approval', random.pick(ended), { type: 'approved', approver: 'late' }, ['terminal_state', 'not_allowed', 'sealed']);
    },
  },
  interrupt: {
    kind: 'interrupt',
    source: 'client',
    async run(world, view, random) {
      const busy = view.streams('turn-engine', ['streaming', 'tool_executing']);
      if (busy.length === 0) return { kind: 'interrupt (none busy)' };
      const turn = random.pick(busy);
      return random.chance(0.5)
        ? dispatch(world, 'interrupt', turn, { type: 'interrupt', reason: 'user stop' })
        : dispatch(world, 'steer', turn, { type: 'steer', input: `Do this instead ${rootTag(parseStreamId(turn)!.root)}` });
    },
  },
  conversationControl: {
    kind: 'conversation control',
    source: 'client',
    async run(world, view, random) {
      const roots = conversations(view);
      if (roots.length === 0) return { kind: 'conversation control (none)' };
      const root = random.pick(roots);
      const event = random.pick([
        { type: 'pause_requested', reason: 'user' },
        { type: 'resume_requested' },
        { type: 'budget_replenished', budget: { modelCalls: world.settings.conversationModelCalls * 2 } },
        { type: 'close_requested', reason: 'done' },
      ]);
      return dispatch(world, `conversation ${event.type}`, root, event);
    },
  },
  chatControl: {
    kind: 'chat control',
    source: 'client',
    async run(world, view, random) {
      const actors = view.streams('chat-actor', ['idle', 'running', 'paused']);
      if (actors.length === 0) return { kind: 'chat control (none)' };
      const event = random.pick([{ type: 'Pause', reason: 'user' }, { type: 'Cancel', reason: 'user_cancelled' }, { type: 'Ping' }]);
      return dispatch(world, `chat ${event.type}`, random.pick(actors), event);
    },
  },
  plan: {
    kind: 'plan',
    source: 'client',
    async run(world, view, random) {
      const roots = conversations(view);
      const c = roots.length === 0 || random.chance(0.5) ? nextId(view, 'c') : random.pick(roots).slice('conv/'.length);
      const plan = planStream(c, `p${random.hex(4)}`);
      const result = await world.client.spawn(plan, 'autonomy-loop', { goal: `Ship it ${rootTag(`conv/${c}`)}` });
      return { kind: 'plan', stream: plan, outcome: outcomeOf(result) };
    },
  },
  planControl: {
    kind: 'plan control',
    source: 'client',
    async run(world, view, random) {
      const plans = view.streams('autonomy-loop', ['planning', 'executing', 'reviewing', 'blocked', 'goal_received']);
      if (plans.length === 0) return { kind: 'plan control (none)' };
      const plan = random.pick(plans);
      const state = view.value.get(plan);
      const event =
        state === 'planning'
          ? random.pick([{ type: 'plan_approved' }, { type: 'plan_rejected', changes: 'smaller steps' }])
          : state === 'blocked'
            ? { type: 'retry_task', taskId: 't1' }
            : random.chance(0.3)
              ? { type: 'user_cancel', reason: 'enough' }
              : { type: 'plan_approved' };
      return dispatch(world, `plan ${event.type}`, plan, event);
    },
  },
  react: {
    kind: 'react',
    source: 'client',
    async run(world, view, random) {
      const reacts = view.streams('react-agent');
      let stream: string;
      if (reacts.length === 0 || random.chance(0.4)) {
        const roots = conversations(view);
        const turns = view.streams('turn-engine').filter((turn) => turn.startsWith('conv/'));
        if (turns.length > 0 && random.chance(0.15)) {
          // A ReAct loop for an agent that has turns already: one agent, two kinds of stream.
          const { root, agentId } = parseStreamId(random.pick(turns)) as { root: string; agentId: string };
          stream = agentStreams(root, agentId).react;
        } else {
          const root = roots.length === 0 || random.chance(0.5) ? `conv/${nextId(view, 'c')}` : random.pick(roots);
          stream = agentStreams(root, `react-${random.hex(3)}`).react;
        }
        const spawned = await world.client.spawn(stream, 'react-agent');
        if (!spawned.accepted) return { kind: 'react spawn', stream, outcome: outcomeOf(spawned) };
      } else {
        stream = random.pick(reacts);
      }
      const root = parseStreamId(stream)!.root;
      return dispatch(world, 'react message', stream, {
        type: 'user-message-received',
        messageId: `m${random.hex(6)}`,
        content: `What now ${rootTag(root)}`,
        timestamp: world.clock.now,
      });
    },
  },
  cliSession: {
    kind: 'cli session',
    source: 'client',
    async run(world, view, random) {
      const stream = `session/s${random.hex(6)}`;
      const cli = random.pick(['fake-ndjson', 'fake-acp']);
      // cline's NDJSON cannot be answered while it runs: its sessions run in auto-approve mode.
      const spawned = await world.client.spawn(stream, 'agent-manager-session', { cli, autoApprove: cli === 'fake-ndjson' || random.chance(0.3) });
      if (!spawned.accepted) return { kind: 'cli session', stream, outcome: outcomeOf(spawned) };
      return dispatch(world, 'cli session', stream, { type: 'start_session', prompt: 'Fix the failing test' });
    },
  },
  cliControl: {
    kind: 'cli control',
    source: 'client',
    async run(world, view, random) {
      const sessions = view.streams('agent-manager-session');
      if (sessions.length === 0) return { kind: 'cli control (none)' };
      const session = random.pick(sessions);
      const byState: Record<string, readonly { type: string; [key: string]: unknown }[]> = {
        waiting_approval: [{ type: 'approve_action' }, { type: 'reject_action' }],
        waiting_input: [{ type: 'send_message', text: 'go on' }],
        completed: [{ type: 'send_message', text: 'one more thing' }],
        paused: [{ type: 'resume_session' }],
        error: [{ type: 'retry' }, { type: 'resume_session' }],
        streaming: [{ type: 'cancel_session' }],
        creating: [{ type: 'cancel_session' }],
      };
      const event = random.pick(byState[view.value.get(session) ?? ''] ?? [{ type: 'cancel_session' }]);
      return dispatch(world, `cli ${event.type}`, session, event);
    },
  },
  badInput: {
    kind: 'bad input',
    source: 'client',
    async run(world, view, random) {
      const streams = [...view.machine.keys()];
      const shape = random.pick(['malformed', 'unknownStream', 'outOfOrder', 'approveNeverAsked'] as const);
      if (shape === 'unknownStream' || streams.length === 0) {
        return dispatch(world, 'bad input: unknown stream', `conv/nobody${random.hex(4)}/agent/x/turn`, { type: 'start_turn', input: 'hi' }, ['unknown_stream']);
      }
      if (shape === 'malformed')
        return dispatch(world, 'bad input: malformed', random.pick(streams), { type: 'no_such_event', junk: [1, 2] }, ['unknown_event', 'invalid_event', 'sealed']);
      if (shape === 'approveNeverAsked') {
        const calls = view.streams('tool-call', ['executing', 'completed_result', 'error_result', 'timeout_result', 'cancelled_result']);
        if (calls.length > 0) return dispatch(world, 'bad input: approve never asked', random.pick(calls), { type: 'approved' }, ['not_allowed', 'terminal_state', 'sealed']);
      }
      const turns = view.streams('turn-engine', ['idle']);
      if (turns.length > 0) return dispatch(world, 'bad input: out of order', random.pick(turns), { type: 'tools_finished', more: false }, ['not_allowed', 'sealed']);
      return dispatch(world, 'bad input: malformed', random.pick(streams), { type: 7 }, ['unknown_event', 'invalid_event', 'sealed']);
    },
  },
};

/** How often each action is drawn, before a seed's swarm draws its own mix. */
const WEIGHTS = {
  conversation: 6,
  message: 6,
  chat: 6,
  approve: 10,
  lateApproval: 2,
  cancelCall: 2,
  interrupt: 3,
  conversationControl: 3,
  chatControl: 3,
  plan: 4,
  planControl: 4,
  react: 5,
  cliSession: 4,
  cliControl: 6,
  badInput: 3,
  wait: 12,
  jump: 3,
  crash: 2,
} as const;
export type ActionKind = keyof typeof WEIGHTS;
/** Every kind of action a step may take. */
export const ACTION_KINDS = Object.keys(WEIGHTS) as ActionKind[];

/**
 * A seed's mix of actions (swarm testing): each kind's weight is switched off, kept or tripled by
 * the seed, so a seed drives a few systems hard rather than all of them thinly, and a defect one
 * kind of action hides in a full mix shows in another seed's. Waiting stays on: time must pass.
 */
export function drawMix(random: Random): Readonly<Record<ActionKind, number>> {
  const mix = {} as Record<ActionKind, number>;
  for (const [kind, weight] of Object.entries(WEIGHTS) as [ActionKind, number][]) mix[kind] = kind === 'wait' ? weight : weight * random.pick([0, 1, 1, 3]);
  return mix;
}

/** A step's action, drawn from the seed's mix. */
export function drawAction(random: Random, mix: Readonly<Record<ActionKind, number>>): Action {
  const kind = random.weighted(mix);
  if (kind === 'wait' || kind === 'jump' || kind === 'crash') return worldAction(kind);
  return actions[kind]!;
}

/** The world's own actions: time passing (a little, or a jump of minutes), and a crash of the process. */
function worldAction(kind: 'wait' | 'jump' | 'crash'): Action {
  return {
    kind,
    source: 'world',
    async run(world, _view, random) {
      if (kind === 'crash') {
        await world.crash();
        world.start();
        return { kind: 'crash and restart' };
      }
      const ms = kind === 'wait' ? random.int(100, 30_000) : random.int(5 * 60_000, 40 * 60_000);
      await world.clock.advance(ms);
      return { kind: `${kind} ${ms} ms` };
    },
  };
}
