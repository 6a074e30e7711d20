import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SEGMENT, agentStreams, chatActorStream, chatStream, conversationStream, parseStreamId, planStream, rootOf, toSegment } from '../../src/index.js';

describe('stream ids', () => {
  it('names every stream of an agent under its conversation, and parses each back', () => {
    const a = agentStreams(conversationStream('c1'), 'helper');
    expect([a.root, a.lifecycle, a.turn, a.react, a.call('x1')]).toEqual([
      'conv/c1',
      'conv/c1/agent/helper',
      'conv/c1/agent/helper/turn',
      'conv/c1/agent/helper/react',
      'conv/c1/agent/helper/call/x1',
    ]);
    expect(parseStreamId(a.root)).toEqual({ kind: 'conversation', root: 'conv/c1', rootKind: 'conv', id: 'c1' });
    expect(parseStreamId(a.lifecycle)).toMatchObject({ kind: 'agent', agentId: 'helper', root: 'conv/c1' });
    expect(parseStreamId(a.turn)).toMatchObject({ kind: 'turn', agentId: 'helper' });
    expect(parseStreamId(a.react)).toMatchObject({ kind: 'react', agentId: 'helper' });
    expect(parseStreamId(a.call('x1'))).toMatchObject({ kind: 'call', agentId: 'helper', callId: 'x1' });
  });

  it('roots a chat and its actors and agents in chat/<id>', () => {
    expect(chatActorStream('42', 3)).toBe('chat/42/actor/3');
    expect(parseStreamId('chat/42/actor/3')).toEqual({ kind: 'actor', root: 'chat/42', rootKind: 'chat', id: '42', actor: 3 });
    expect(agentStreams(chatStream('42'), 'assistant').turn).toBe('chat/42/agent/assistant/turn');
    expect(rootOf('chat/42/agent/assistant/call/c9')).toBe('chat/42');
  });

  it('leaves every other id outside the scheme', () => {
    for (const stream of [
      'chat-1',
      'conv',
      'conv/',
      'conv//agent/a',
      'conv/c/agent',
      'conv/c/agent/a/other',
      'conv/c/actor/1',
      'chat/c/actor/0',
      'chat/c/actor/01',
      'x/c',
      'provider/openai',
    ]) {
      expect(parseStreamId(stream), stream).toBeUndefined();
      expect(rootOf(stream), stream).toBeUndefined();
    }
  });

  it('refuses segments that would break the scheme, naming what was wrong', () => {
    expect(() => conversationStream('a/b')).toThrow('a conversation id must be 1 to 128 characters with no "/", NUL or lone surrogate, got "a/b"');
    expect(() => agentStreams('conv/c', '')).toThrow('an agent id must be');
    expect(() => agentStreams('conv/c/agent/a', 'b')).toThrow("an agent's root must be a conversation stream");
    expect(() => agentStreams('conv/c', 'a').call('x'.repeat(MAX_SEGMENT + 1))).toThrow('a call id must be');
    expect(() => chatActorStream('c', 0)).toThrow('an actor number must be a positive integer, got 0');
  });

  it('fits any id a model makes up into a call segment that parses back to itself', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (id) => {
        const call = agentStreams('conv/c', 'a').call(toSegment(id));
        expect(parseStreamId(call)).toMatchObject({ kind: 'call', callId: toSegment(id) });
      }),
    );
  });
});

describe('plan stream ids', () => {
  it('conv/<c>/plan/<p> names a plan of the conversation, and parses back', () => {
    expect(planStream('c1', 'p1')).toBe('conv/c1/plan/p1');
    expect(parseStreamId('conv/c1/plan/p1')).toEqual({ kind: 'plan', root: 'conv/c1', rootKind: 'conv', id: 'c1', planId: 'p1' });
    expect(rootOf('conv/c1/plan/p1')).toBe('conv/c1');
    // Not a plan: under a chat, or with more or fewer segments.
    for (const stream of ['chat/c1/plan/p1', 'conv/c1/plan', 'conv/c1/plan/p1/x']) expect(parseStreamId(stream)).toBeUndefined();
    expect(() => planStream('c1', 'a/b')).toThrow('a plan id must be 1 to 128 characters with no "/", NUL or lone surrogate, got "a/b"');
  });
});
