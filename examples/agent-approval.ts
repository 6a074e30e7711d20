// An agent whose tools need a person's approval, offline: a scripted model (no network) asks
// for three calls; one needs no approval, the approver allows one email and denies the other.
// The tool runs only when approved; the model then answers with the results.
//
//   npm run example -- examples/agent-approval.ts
import assert from 'node:assert/strict';
import { filter, firstValueFrom } from 'rxjs';
import { z } from 'zod';
import { agentStreams, createEngine, type ToolCallState, type TurnEngineState } from 'runestream';
import { agentEpics, defineTool, scriptedModel } from 'runestream/agents';

const sent: string[] = [];
const clock = defineTool({
  name: 'clock',
  description: 'The current time, in UTC.',
  inputSchema: z.object({}),
  execute: () => ({ now: '2026-01-01T09:00:00Z' }),
});
const sendEmail = defineTool({
  name: 'send_email',
  description: 'Sends an email.',
  inputSchema: z.object({ to: z.string(), body: z.string() }),
  needsApproval: true, // the call waits, durably, until someone approves or denies it
  execute: ({ to }) => {
    sent.push(to);
    return { sent: to };
  },
});

const model = scriptedModel([
  {
    text: 'Sending the reminders.',
    toolCalls: [
      { toolName: 'clock', input: {}, toolCallId: 't1' },
      { toolName: 'send_email', input: { to: 'team@example.com', body: 'Standup at 9' }, toolCallId: 'e1' },
      { toolName: 'send_email', input: { to: 'everyone@elsewhere.test', body: 'Standup at 9' }, toolCallId: 'e2' },
    ],
  },
  { text: ' Done: one sent, one refused.' },
]);

const engine = createEngine({ epics: agentEpics({ model, tools: [clock, sendEmail] }) });
const agent = agentStreams('conv/standup', 'assistant');

// The approver: every call that asks is shown, and decided by a rule (a UI would ask a person).
const approver = engine
  .runes$()
  .pipe(filter((rune) => rune.kind === 'tool.approval_requested'))
  .subscribe((rune) => {
    void (async () => {
      const call = await engine.snapshot<ToolCallState>(rune.stream);
      const { to } = call!.state.arguments as { to: string };
      const allowed = to.endsWith('@example.com');
      console.log(`${call!.state.toolName} to ${to}: ${allowed ? 'approved' : 'denied'}`);
      // dispatch never throws for a refused event; it resolves with { accepted: false, code }.
      await engine.dispatch(rune.stream, allowed ? { type: 'approved', approver: 'policy' } : { type: 'denied', reason: 'outside the company' });
    })().catch((error: unknown) => console.error('approver:', error));
  });

await engine.spawn(agent.turn, 'turn-engine');
const answered = firstValueFrom(engine.state$<TurnEngineState>(agent.turn).pipe(filter((turn) => turn.value === 'idle' && turn.turn === 1)));
await engine.dispatch(agent.turn, { type: 'start_turn', input: 'Remind everyone of the standup' });
console.log((await answered).output);
assert.deepEqual(sent, ['team@example.com']);
approver.unsubscribe();
await engine.close();
// Logs:
// send_email to team@example.com: approved
// send_email to everyone@elsewhere.test: denied
// Sending the reminders. Done: one sent, one refused.
