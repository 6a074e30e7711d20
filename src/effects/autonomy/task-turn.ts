import { Observable, concatMap, filter, first, lastValueFrom, merge, mergeMap, of, toArray } from 'rxjs';
import { MAX_TASK_TEXT, type TaskEvidence } from '../../reducers/autonomy-loop/schema.js';
import type { Rune } from '../../reducers/rune.js';
import { toolCall, toolCallStatus } from '../../reducers/tool-call/machine.js';
import { turnEndingOf, turnEngine } from '../../reducers/turn-engine/machine.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import type { EpicContext } from '../../streams/epic.js';
import { stateOf } from '../agent/state-of.js';
import { turnRunes$ } from '../agent/turn-history.js';

/** Turn `n` of an agent as its log has it: the rune that started it, and the one that ended it once it ended. */
export interface TaskTurn {
  readonly start: Rune | undefined;
  readonly end: Rune | undefined;
}

/** A turn that has ended. */
export interface EndedTurn {
  readonly start: Rune;
  readonly end: Rune;
}

/** Finds turn `n` (its `turn.started` rune, `turnId` n) in the agent's turn log, and its end. */
export async function findTurn(context: EpicContext, agent: AgentStreams, n: number): Promise<TaskTurn> {
  const runes = await lastValueFrom(turnRunes$(agent.turn, context));
  const index = runes.findIndex((rune) => rune.kind === 'turn.started' && (rune.payload as { turnId?: string } | undefined)?.turnId === String(n));
  if (index < 0) return { start: undefined, end: undefined };
  const end = runes.slice(index + 1).find((rune) => turnEndingOf(rune) !== undefined);
  return { start: runes[index], end };
}

/** Turn `n` once it has ended: from the log if it has, else at its ending rune. */
export const turnEnded$ = (runes$: Observable<Rune>, context: EpicContext, agent: AgentStreams, n: number): Observable<EndedTurn> =>
  merge(of(undefined), runes$.pipe(filter((rune) => rune.stream === agent.turn && turnEndingOf(rune) !== undefined))).pipe(
    concatMap(() => findTurn(context, agent, n)),
    filter((turn): turn is EndedTurn => turn.start !== undefined && turn.end !== undefined),
    first(),
  );

/** The agent's turn stream idle (spawned, or a turn ended): now or when it gets there. Emits its turn count. */
export const turnIdle$ = (runes$: Observable<Rune>, context: EpicContext, agent: AgentStreams): Observable<number> =>
  merge(of(undefined), runes$.pipe(filter((rune) => rune.stream === agent.turn && rune.to === 'idle'))).pipe(
    concatMap(() => stateOf(context, agent.turn, turnEngine)),
    filter((turn) => turn?.value === 'idle'),
    first(),
    mergeMap((turn) => of(turn!.turn)),
  );

const cut = (text: string): string => (text.length > MAX_TASK_TEXT ? `${text.slice(0, MAX_TASK_TEXT - 1)}…` : text);

/** What a task's ended turn gives the plan: success with its final output, or failure with why. */
export function outcomeOf(end: Rune): { outcome: 'success' | 'failure'; result: string } {
  const payload = (end.payload ?? {}) as { finalOutput?: string; message?: string; reason?: string };
  const ending = turnEndingOf(end);
  if (ending === 'completed') return { outcome: 'success', result: cut(payload.finalOutput ?? '') };
  if (ending === 'error') return { outcome: 'failure', result: cut(`the turn failed: ${payload.message ?? 'error'}`) };
  return { outcome: 'failure', result: cut(`the turn was interrupted${payload.reason === undefined ? '' : `: ${payload.reason}`}`) };
}

/** The evidence of a task's turn: its stream, its seq range, and how each of its tool calls ended. */
export async function evidenceOf(context: EpicContext, agent: AgentStreams, turn: EndedTurn): Promise<TaskEvidence> {
  const runes = await lastValueFrom(context.read(agent.turn, turn.start.seq - 1).pipe(toArray()));
  const calls = runes
    .filter((rune) => rune.seq <= turn.end.seq)
    .flatMap((rune) => (rune.event.type === 'tool_calls_received' ? ((rune.event.calls as { callId: string; toolName: string }[] | undefined) ?? []) : []))
    .slice(0, 1000);
  const toolResults = await Promise.all(
    calls.map(async ({ callId, toolName }) => {
      const call = await stateOf(context, agent.call(callId), toolCall);
      const status = call === undefined ? 'missing' : (toolCallStatus(call) ?? call.value);
      return { callId, toolName, status, ...(call?.output === undefined ? {} : { output: call.output }) };
    }),
  );
  return { turn: agent.turn, fromSeq: turn.start.seq, toSeq: turn.end.seq, toolResults };
}
