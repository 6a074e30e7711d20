import { z } from 'zod';
import { agentLifecycle } from './agent-lifecycle/machine.js';
import { conversation } from './conversation/machine.js';
import { Rune } from './rune.js';
import { rootOf } from './stream-ids.js';
import { turnEdgeOf } from './turn-edges.js';

/** The runelog invariants of seed 003 that `checkInvariants` enforces. */
export const InvariantName = z.enum(['INV-TOOL-TERMINAL', 'INV-TOOL-CALL-BEFORE-RESULT', 'INV-TOOL-APPROVAL-BEFORE-EXEC', 'INV-TURN-SEQUENTIAL', 'INV-AGENT-BUDGET']);
export type InvariantName = z.infer<typeof InvariantName>;

/** One broken invariant: which one, the rune where it shows, and what happened. */
export const InvariantViolation = z.object({ invariant: InvariantName, rune: Rune, message: z.string() });
export type InvariantViolation = z.infer<typeof InvariantViolation>;

export interface CheckInvariantsOptions {
  /**
   * `true` (default): the log is finished, so a `tool.call` that never got an outcome breaks
   * INV-TOOL-TERMINAL. `false`: a live log, where calls may still be in flight.
   */
  readonly complete?: boolean;
}

/** What one stream has shown so far, as far as the invariants care. */
interface StreamTrack {
  /** The stream's `tool.call` and where it is in the log (to order the violations found at the end). */
  call?: { rune: Rune; index: number };
  outcome?: Rune;
  /** The `tool.approval_requested` not yet followed by `tool.approved`. */
  approvalPending?: Rune;
  /** The `turn.started` of the turn that has not ended yet. */
  openTurn?: Rune;
  /** An agent's lifecycle: its `agent.terminated` by `budget_exhausted`. */
  budgetExhausted?: Rune;
  /** A conversation: its `session.suspended` by `budget_exhausted`, while it lasts. */
  budgetSuspended?: Rune;
}

const TURN_ENDS = new Set(['turn.completed', 'turn.interrupted', 'turn.error']);

const at = (rune: Rune): string => `stream "${rune.stream}" seq ${rune.seq}`;

/** A rune that runs the tool: entering `executing` other than by approval, progress, or a result out of `executing`. */
const executes = (rune: Rune): boolean =>
  (rune.to === 'executing' && rune.kind !== 'tool.approved') || rune.kind === 'tool.progress' || (rune.kind === 'tool.result' && rune.from === 'executing');

/**
 * Every violation of seed 003's runelog invariants in `runes` (in log order, any mix of streams),
 * or `[]` for a clean log. A tool call is its stream: one `toolCall` instance per stream.
 *
 * 1. INV-TOOL-CALL-BEFORE-RESULT: a `tool.result` in a stream with no earlier `tool.call`.
 * 2. INV-TOOL-TERMINAL: a call's second outcome, at that rune. An outcome is a `tool.result` or a
 *    `tool.denied` (its state `denied` is terminal, so a denial is the call's only outcome). With
 *    `complete` (the default), also a `tool.call` that never got an outcome, at the `tool.call`.
 * 3. INV-TOOL-APPROVAL-BEFORE-EXEC: after `tool.approval_requested`, each rune that executes the
 *    call (enters `executing` other than by `tool.approved`, a `tool.progress`, or a `tool.result`
 *    from `executing`) before a `tool.approved`.
 * 4. INV-TURN-SEQUENTIAL: at most one turn active per agent. On an agent's streams
 *    (`<root>/agent/<a>/turn` and `.../react`, both together: see `turnEdgeOf`), a turn's start
 *    while another turn of the same agent has not ended: a `turn.started` while its turn stream's
 *    previous turn has not ended (`turn.completed`, `turn.interrupted` or `turn.error`), or a
 *    start on one of its streams while a turn is open on the other (a ReAct loop's model call is
 *    its turn: its lifecycle's turn `react-<seq>`). On any other stream, a
 *    `turn.started` while that stream's previous turn has not ended.
 * 5. INV-AGENT-BUDGET: a turn started over budget. A turn is started by an agent's lifecycle's
 *    `turn.started` rune (machine `agent-lifecycle`; a turn stream's own `turn.started` that is
 *    interrupted at once, never assigned to the agent, is no turn of it). It breaks the invariant
 *    after that lifecycle's `agent.terminated` by `budget_exhausted`, or while its conversation
 *    (the stream `<root>` its id is rooted in, machine `conversation`) is suspended for budget:
 *    after a `session.suspended` by `budget_exhausted` and before the next rune that takes the
 *    conversation out of `suspended` (`session.unsuspended`, `session.closing`).
 *
 * Violations come in the order of the runes they point at.
 *
 * @example
 * ```ts
 * import { checkInvariants } from 'runestream';
 * const rune = { stream: 'call-1', machine: 'tool-call', at: 0 };
 * const [broken] = checkInvariants([{ ...rune, seq: 1, kind: 'tool.result', event: { type: 'success', output: 1 }, from: 'executing', to: 'completed_result' }]);
 * console.log(broken?.invariant, '-', broken?.message);
 * // Logs: INV-TOOL-CALL-BEFORE-RESULT - stream "call-1" seq 1: tool.result with no earlier tool.call
 * ```
 */
export function checkInvariants(runes: readonly Rune[], options: CheckInvariantsOptions = {}): InvariantViolation[] {
  const { complete = true } = options;
  const streams = new Map<string, StreamTrack>();
  /** Per agent (`<root>/agent/<a>`), the rune that opened its turn that has not ended yet. */
  /** Per agent, its open turn: the stream it runs on (see `TurnEdge.stream`) and the seq of its start. */
  const agentTurns = new Map<string, { readonly stream: string; readonly seq: number }>();
  const found: Array<{ index: number; violation: InvariantViolation }> = [];
  const report = (invariant: InvariantName, rune: Rune, index: number, message: string): void => {
    found.push({ index, violation: { invariant, rune, message: `${at(rune)}: ${message}` } });
  };

  runes.forEach((rune, index) => {
    let track = streams.get(rune.stream);
    if (track === undefined) streams.set(rune.stream, (track = {}));

    const edge = turnEdgeOf(rune);
    if (edge !== undefined) {
      const open = agentTurns.get(edge.agent);
      if (edge.edge === 'end') {
        if (open?.stream === edge.stream) agentTurns.delete(edge.agent);
      } else {
        if (open !== undefined && open.stream !== edge.stream) {
          report('INV-TURN-SEQUENTIAL', rune, index, `${rune.kind} while the same agent's turn on "${open.stream}" (started at seq ${open.seq}) has not ended`);
        } else if (open !== undefined && rune.kind === 'turn.started') {
          report('INV-TURN-SEQUENTIAL', rune, index, `turn.started while the turn started at seq ${open.seq} has not ended`);
        }
        agentTurns.set(edge.agent, { stream: edge.stream, seq: rune.seq });
      }
    }

    switch (rune.kind) {
      case 'tool.call':
        track.call ??= { rune, index };
        break;
      case 'tool.approval_requested':
        track.approvalPending = rune;
        break;
      case 'tool.approved':
        track.approvalPending = undefined;
        break;
      case 'turn.started':
        if (edge !== undefined) break; // an agent's turn: checked per agent above
        if (track.openTurn !== undefined) {
          report('INV-TURN-SEQUENTIAL', rune, index, `turn.started while the turn started at seq ${track.openTurn.seq} has not ended`);
        }
        track.openTurn = rune;
        break;
    }
    if (TURN_ENDS.has(rune.kind)) track.openTurn = undefined;

    if (rune.machine === agentLifecycle.id) {
      if (rune.kind === 'agent.terminated' && rune.event.type === 'budget_exhausted') track.budgetExhausted ??= rune;
      if (rune.kind === 'turn.started') {
        const suspended = streams.get(rootOf(rune.stream) ?? '')?.budgetSuspended;
        if (track.budgetExhausted !== undefined) {
          report('INV-AGENT-BUDGET', rune, index, `turn.started after the agent's budget was exhausted (agent.terminated at seq ${track.budgetExhausted.seq})`);
        } else if (suspended !== undefined) {
          report('INV-AGENT-BUDGET', rune, index, `turn.started while its conversation is suspended for budget (stream "${suspended.stream}" seq ${suspended.seq})`);
        }
      }
    } else if (rune.machine === conversation.id && rune.from !== rune.to) {
      track.budgetSuspended = rune.kind === 'session.suspended' && rune.event.type === 'budget_exhausted' ? rune : undefined;
    }

    if (track.approvalPending !== undefined && executes(rune)) {
      report('INV-TOOL-APPROVAL-BEFORE-EXEC', rune, index, `${rune.kind} executes the call before approval (requested at seq ${track.approvalPending.seq})`);
    }

    if (rune.kind === 'tool.result' || rune.kind === 'tool.denied') {
      if (track.call === undefined) {
        if (rune.kind === 'tool.result') report('INV-TOOL-CALL-BEFORE-RESULT', rune, index, 'tool.result with no earlier tool.call');
      } else if (track.outcome !== undefined) {
        report('INV-TOOL-TERMINAL', rune, index, `${rune.kind} is a second outcome for the call; its first was ${track.outcome.kind} at seq ${track.outcome.seq}`);
      } else {
        track.outcome = rune;
      }
    }
  });

  if (complete) {
    for (const track of streams.values()) {
      if (track.call !== undefined && track.outcome === undefined) {
        report('INV-TOOL-TERMINAL', track.call.rune, track.call.index, 'tool.call never got an outcome (a tool.result or tool.denied)');
      }
    }
  }
  return found.sort((a, b) => a.index - b.index).map((f) => f.violation);
}
