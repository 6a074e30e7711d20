import { filter, firstValueFrom } from 'rxjs';
import type { Engine, Rune, ToolCallInput, ToolCallState } from '../../../src/index.js';

/** A rune of a `tool-call` stream, as the engine would publish it. */
export function callRune(
  stream: string,
  seq: number,
  event: { type: string } & Record<string, unknown>,
  from: string | undefined,
  to: string,
  options: { kind?: string; at?: number } = {},
): Rune {
  const { kind = event.type, at = 0 } = options;
  return { stream, seq, machine: 'tool-call', kind, event, ...(from === undefined ? {} : { from }), to, at };
}

/** The spawn rune of a call (`tool.call`, state pending_call). */
export const spawnRune = (stream: string, input: ToolCallInput, at = 0): Rune =>
  callRune(stream, 1, { type: 'spawn', input }, undefined, 'pending_call', { kind: 'tool.call', at });

/** A call's state in `value`. */
export const callState = (input: ToolCallInput, value: ToolCallState['value'] = 'executing'): ToolCallState => ({ ...input, value, progressCount: 0 });

const TERMINAL = new Set(['denied', 'completed_result', 'error_result', 'timeout_result', 'cancelled_result']);

/** The first rune of a call (stored or live) that matches. */
export const runeOf = (engine: Engine, stream: string, match: (rune: Rune) => boolean): Promise<Rune> => firstValueFrom(engine.runes$(stream).pipe(filter(match)));

/** The call's outcome rune (the one entering a terminal state), stored or live. */
export const outcomeOf = (engine: Engine, stream: string): Promise<Rune> => runeOf(engine, stream, (rune) => TERMINAL.has(rune.to ?? ''));

/** Each rune as `kind` or `kind:event` when they differ, for compact assertions. */
export const kinds = (runes: readonly Rune[]): string[] => runes.map((r) => (r.kind === r.event.type ? r.kind : `${r.kind}:${r.event.type}`));
