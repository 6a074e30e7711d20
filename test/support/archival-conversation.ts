import type { Engine } from '../../src/index.js';

/**
 * Makes conversation `conv/<id>` with one agent (`conv/<id>/agent/a1`, idle) and `turns` turns,
 * then closes it (sealed: what archival takes) unless `close` is false. Fails on any refusal.
 */
export async function conversationWithTurns(engine: Engine, id: string, turns: number, close = true): Promise<void> {
  const conv = `conv/${id}`;
  const ok = async (result: Promise<{ accepted: boolean }>): Promise<void> => {
    const answer = await result;
    if (!answer.accepted) throw new Error(`refused: ${JSON.stringify(answer)}`);
  };
  await ok(engine.spawn(conv, 'conversation', { conversationId: id }));
  await ok(engine.spawn(`${conv}/agent/a1`, 'agent-lifecycle', { agentId: 'a1', role: 'coder' }));
  await ok(engine.dispatch(`${conv}/agent/a1`, { type: 'init_complete' }));
  await ok(engine.dispatch(conv, { type: 'first_message' }));
  for (let i = 0; i < turns; i++) {
    await ok(engine.dispatch(conv, { type: 'new_turn' }));
    await ok(engine.dispatch(conv, { type: 'turn_completed' }));
  }
  if (!close) return;
  await ok(engine.dispatch(conv, { type: 'close_requested', reason: 'done' }));
  await ok(engine.dispatch(conv, { type: 'cleanup_complete' }));
}
