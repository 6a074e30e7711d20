import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AgentManagerSessionEvent, fromCliMessage } from '../../src/index.js';

/** The real CLI's asks and says; `null` where agentManagerSession has no event for it. */
const asks: Array<[string, string | null]> = [
  ['followup', 'ask:followup'],
  ['command', 'ask:command'],
  ['command_output', null],
  ['completion_result', 'ask:completion_result'],
  ['tool', 'ask:tool'],
  ['api_req_failed', 'ask:api_req_failed'],
  ['resume_task', 'ask:resume_task'],
  ['resume_completed_task', 'ask:resume_completed_task'],
  ['mistake_limit_reached', 'ask:mistake_limit_reached'],
  ['browser_action_launch', 'ask:browser_action_launch'],
  ['use_mcp_server', 'ask:use_mcp_server'],
  ['auto_approval_max_req_reached', null],
  ['payment_required_prompt', 'ask:payment_required_prompt'],
  ['invalid_model', 'ask:invalid_model'],
  ['report_bug', null],
  ['condense', null],
  ['checkpoint_restore', null],
];
const says: Array<[string, string | null]> = [
  ['error', null],
  ['api_req_started', 'api_req_started'],
  ['api_req_finished', null],
  ['api_req_retried', null],
  ['text', 'say:text'],
  ['reasoning', null],
  ['completion_result', 'say:completion_result'],
  ['user_feedback', null],
  ['command_output', null],
  ['browser_action', null],
  ['checkpoint_saved', 'say:checkpoint_saved'],
  ['tool', null],
];
const cases = [...asks.map(([name, event]) => ({ type: 'ask' as const, name, event })), ...says.map(([name, event]) => ({ type: 'say' as const, name, event }))];

describe("fromCliMessage: the real CLI's asks and says", () => {
  it.each(cases)('$type $name -> $event', ({ type, name, event }) => {
    const message = { ts: 1_700_000_000_000, type, [type]: name, partial: false, text: 'hello' };
    if (event === null) {
      expect(fromCliMessage(message)).toEqual({ ignored: `${type}:${name} has no agentManagerSession event` });
    } else {
      expect(fromCliMessage(message)).toEqual({ event: { type: event, partial: false, text: 'hello', ts: 1_700_000_000_000 } });
      expect(AgentManagerSessionEvent.safeParse((fromCliMessage(message) as { event: unknown }).event).success).toBe(true);
    }
  });

  it('carries partial, text and ts only when the message has them', () => {
    expect(fromCliMessage({ ts: 1, type: 'ask', ask: 'tool', partial: true })).toEqual({ event: { type: 'ask:tool', partial: true, ts: 1 } });
    expect(fromCliMessage({ type: 'say', say: 'checkpoint_saved' })).toEqual({ event: { type: 'say:checkpoint_saved' } });
  });

  it('drops a ts that is not an epoch-ms integer rather than the message', () => {
    for (const ts of [-1, 1.5, '1', Number.MAX_VALUE]) {
      expect(fromCliMessage({ ts, type: 'say', say: 'text', text: 'hi' })).toEqual({ event: { type: 'say:text', text: 'hi' } });
    }
  });

  it('a name is only an event for its own kind of message', () => {
    expect(fromCliMessage({ type: 'ask', ask: 'api_req_started' })).toEqual({ ignored: 'ask:api_req_started has no agentManagerSession event' });
    expect(fromCliMessage({ type: 'say', say: 'followup' })).toEqual({ ignored: 'say:followup has no agentManagerSession event' });
  });
});

describe('fromCliMessage: malformed input', () => {
  it.each([
    ['a string', 'ask:tool'],
    ['null', null],
    ['an array', [{ type: 'ask', ask: 'tool' }]],
    ['no type', { ts: 1, ask: 'tool' }],
    ['an unknown type', { ts: 1, type: 'tell', tell: 'tool' }],
    ['an ask without its name', { ts: 1, type: 'ask', say: 'text' }],
    ['a say whose name is not a string', { ts: 1, type: 'say', say: 7 }],
    ['a partial that is not a boolean', { ts: 1, type: 'ask', ask: 'tool', partial: 'true' }],
    ['a text that is not a string', { ts: 1, type: 'say', say: 'text', text: null }],
  ])('%s is ignored with a reason', (_, message) => {
    expect('ignored' in fromCliMessage(message)).toBe(true);
  });

  it('says precisely what is wrong', () => {
    const reason = (message: unknown) => (fromCliMessage(message) as { ignored: string }).ignored;
    expect(reason(undefined)).toMatchInlineSnapshot(`"not a CLI message: expected an object, got undefined"`);
    expect(reason([])).toMatchInlineSnapshot(`"not a CLI message: expected an object, got an array"`);
    expect(reason({ ts: 1 })).toMatchInlineSnapshot(`"invalid CLI message: type: Invalid option: expected one of "ask"|"say""`);
    expect(reason({ type: 'ask', text: 'x' })).toMatchInlineSnapshot(`"invalid CLI message: ask: required when type is "ask""`);
    expect(reason({ type: 'ask', ask: 'tool', partial: 1 })).toMatchInlineSnapshot(`"invalid CLI message: partial: Invalid input: expected boolean, received number"`);
  });
});

describe('fromCliMessage: properties', () => {
  const mapsSafely = (message: unknown) => {
    const result = fromCliMessage(message);
    if ('event' in result) {
      expect(AgentManagerSessionEvent.safeParse(result.event).success, JSON.stringify(result.event)).toBe(true);
    } else {
      expect(result.ignored.length).toBeGreaterThan(0);
    }
  };

  it('never throws on anything, and every event it returns passes the event schema', () => {
    fc.assert(fc.property(fc.anything({ withNullPrototype: true, withObjectString: true }), mapsSafely), { numRuns: 1000 });
  });

  it('maps every well-formed CLI message to a valid event or a reason', () => {
    const message = fc.record(
      {
        ts: fc.nat(),
        type: fc.constantFrom('ask', 'say'),
        ask: fc.constantFrom(...asks.map(([name]) => name), 'toString', '__proto__'),
        say: fc.constantFrom(...says.map(([name]) => name), 'constructor'),
        partial: fc.boolean(),
        text: fc.string(),
      },
      { requiredKeys: ['type'] },
    );
    fc.assert(fc.property(message, mapsSafely), { numRuns: 1000 });
  });
});
