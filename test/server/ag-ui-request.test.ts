import { describe, expect, it } from 'vitest';
import { newUserInput, parseRunInput } from '../../src/server/ag-ui/ag-ui-request.js';

const body = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));

describe('AG-UI request body', () => {
  it('the new input is the user messages after the last message of another role, text parts joined', () => {
    expect(newUserInput([])).toBeUndefined();
    expect(newUserInput([{ id: '1', role: 'user', content: 'hi' }])).toBe('hi');
    expect(
      newUserInput([
        { id: '1', role: 'user', content: 'hi' },
        { id: '2', role: 'assistant', content: 'Hello' },
        { id: '3', role: 'user', content: 'one' },
        { id: '4', role: 'user', content: [{ type: 'text', text: 'tw' }, { type: 'image' }, { type: 'text', text: 'o' }] },
      ]),
    ).toBe('one\n\ntwo');
    // A conversation ending with the agent's message (or a tool result) has no new input: a rejoin.
    expect(
      newUserInput([
        { id: '1', role: 'user', content: 'hi' },
        { id: '2', role: 'assistant', content: 'Hello' },
      ]),
    ).toBeUndefined();
  });

  it('each wrong field is named, on one line; other fields of RunAgentInput pass', () => {
    expect(parseRunInput(body({ threadId: 't', runId: 'r', messages: [], tools: [], context: [], state: { a: 1 } }))).toMatchObject({ ok: true, input: { threadId: 't' } });
    const wrong = parseRunInput(body({ threadId: '', runId: 7, messages: [{ role: 'user' }] }));
    expect(wrong).toMatchObject({ ok: false, code: 'invalid_message' });
    const { message } = wrong as { message: string };
    expect(message).not.toContain('\n');
    for (const field of ['threadId', 'runId', 'messages.0.id']) expect(message).toContain(field);
    expect(parseRunInput(Buffer.from('nope'))).toMatchObject({ ok: false, code: 'invalid_json' });
  });
});
