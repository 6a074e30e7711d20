import { MockLanguageModelV4 } from 'ai/test';
import { TestScheduler } from 'rxjs/testing';
import { marbles } from 'rxjs-marbles';
import { describe, expect, it } from 'vitest';
import { ModelCallTimeoutError, modelCall$, scriptedModel, type ModelPart } from '../../../src/agents.js';
import { ManualClock, collect, defined, request, settle } from './support.js';

/** Waits, a turn of the event loop at a time, until `condition` holds (at most `turns` turns). */
async function until(condition: () => boolean, turns = 1000): Promise<void> {
  for (let i = 0; i < turns && !condition(); i++) await settle();
  expect(condition()).toBe(true);
}

describe('modelCall$', () => {
  it('streams text deltas, tool calls and the finish as ModelParts', async () => {
    const model = scriptedModel([{ text: 'Let me check.', toolCalls: [{ toolName: 'weather', input: { city: 'Oslo' } }], usage: { inputTokens: 12, outputTokens: 9 } }]);
    const { values, error } = await collect(modelCall$(model, request));
    expect(error).toBeUndefined();
    expect(values).toEqual<ModelPart[]>([
      { type: 'text-delta', text: 'Let' },
      { type: 'text-delta', text: ' me' },
      { type: 'text-delta', text: ' check.' },
      { type: 'tool-call', toolCallId: 'call_1_0', toolName: 'weather', input: { city: 'Oslo' } },
      { type: 'finish', finishReason: 'tool-calls', usage: { inputTokens: 12, outputTokens: 9, totalTokens: 21 }, model: 'scripted-model', provider: 'scripted' },
    ]);
  });

  it('gives the model the system prompt, the messages, and the tools as JSON Schema function tools', async () => {
    const model = scriptedModel([{ text: 'ok' }]);
    await collect(modelCall$(model, request));
    const call = defined(model.doStreamCalls[0]);
    expect(call.prompt).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: [{ type: 'text', text: 'Weather in Oslo?' }] },
    ]);
    expect(call.tools).toEqual([
      {
        type: 'function',
        name: 'weather',
        description: 'The weather in a city',
        inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    ]);
  });

  it('passes on a tool call the SDK found invalid (an unknown tool), for the tool machine to answer', async () => {
    const model = scriptedModel([{ toolCalls: [{ toolName: 'teleport', input: { to: 'Mars' } }] }]);
    const { values, error } = await collect(modelCall$(model, request));
    expect(error).toBeUndefined();
    expect(values.filter((p) => p.type !== 'finish')).toEqual([{ type: 'tool-call', toolCallId: 'call_1_0', toolName: 'teleport', input: { to: 'Mars' } }]);
  });

  it('errors with the provider’s own error when the call is refused before any output', async () => {
    const refused = Object.assign(new Error('Service Unavailable'), { statusCode: 503 });
    const { values, error } = await collect(modelCall$(scriptedModel([{ error: refused }]), request));
    expect(values).toEqual([]);
    expect(error).toBe(refused);
  });

  it('errors with the error of an error part, after the parts before it and nothing after', async () => {
    const reset = new Error('connection reset by peer');
    const model = scriptedModel([{ text: 'one two three', error: reset, afterDeltas: 2 }]);
    const { values, error } = await collect(modelCall$(model, request));
    expect(values).toEqual([
      { type: 'text-delta', text: 'one' },
      { type: 'text-delta', text: ' two' },
    ]);
    expect(error).toBe(reset);
  });

  it('errors when the provider’s stream itself breaks (a rejected stream)', async () => {
    const broken = new Error('socket hang up');
    let reads = 0;
    const model = new MockLanguageModelV4({
      doStream: async () => ({
        // One part per read; the third read finds the connection gone (an error drops what is queued).
        stream: new ReadableStream(
          {
            pull(controller) {
              reads += 1;
              if (reads === 1) controller.enqueue({ type: 'text-start', id: 't' });
              else if (reads === 2) controller.enqueue({ type: 'text-delta', id: 't', delta: 'Hel' });
              else controller.error(broken);
            },
          },
          { highWaterMark: 0 },
        ),
      }),
    });
    const { values, error } = await collect(modelCall$(model, request));
    expect(values).toEqual([{ type: 'text-delta', text: 'Hel' }]);
    expect(error).toBe(broken);
  });

  it('leaves a call read to its end unaborted: nothing is cancelled, no AbortError made', async () => {
    const model = scriptedModel([{ text: 'a b' }]);
    const { error } = await collect(modelCall$(model, request));
    expect(error).toBeUndefined();
    expect(defined(model.doStreamCalls[0]?.abortSignal).aborted).toBe(false);
  });

  it('aborts the call when unsubscribed: the model sees its signal abort and stops', async () => {
    const model = scriptedModel([{ text: 'a b c d', hang: true, afterDeltas: 2 }]);
    const parts: ModelPart[] = [];
    const subscription = modelCall$(model, request).subscribe({ next: (p) => parts.push(p), error: (e: unknown) => parts.push(e as never) });
    await until(() => parts.length === 2);
    const signal = defined(model.doStreamCalls[0]?.abortSignal);
    expect(signal.aborted).toBe(false);
    subscription.unsubscribe();
    expect(signal.aborted).toBe(true);
    await settle();
    expect(parts).toEqual([
      { type: 'text-delta', text: 'a' },
      { type: 'text-delta', text: ' b' },
    ]); // no error reported for a call the subscriber left
  });

  it('aborts the call at the end of its subscription window', () => {
    const model = scriptedModel([{ hang: true }]);
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    let signal: AbortSignal | undefined;
    scheduler.run(({ expectObservable }) => {
      // Subscribed at 0, unsubscribed at 5 ms: a hanging call emits nothing in its window.
      expectObservable(modelCall$(model, request, { scheduler, timeoutMs: 1000 }), '^ 4ms !').toBe('');
    });
    // The SDK reached the model on a later microtask, with a signal the unsubscription had aborted.
    return until(() => model.doStreamCalls.length === 1).then(() => {
      signal = model.doStreamCalls[0]?.abortSignal;
      expect(signal?.aborted).toBe(true);
    });
  });

  it(
    'errors with a timeout when the provider produces nothing for timeoutMs (virtual time)',
    marbles((m) => {
      const model = scriptedModel([{ hang: true }], { provider: 'acme', modelId: 'slow-1' });
      const call$ = modelCall$(model, request, { timeoutMs: 30_000, scheduler: m.scheduler });
      m.expect(call$).toBeObservable('30s #', undefined, new ModelCallTimeoutError('acme/slow-1', 30_000));
    }),
  );

  it('names the model and the timeout in the timeout error', () => {
    expect(new ModelCallTimeoutError('acme/slow-1', 30_000).message).toMatchInlineSnapshot(
      `"model call to "acme/slow-1" produced nothing for 30000 ms (its timeoutMs): the provider hangs or is unreachable"`,
    );
  });

  it('times out a call that hangs after its first parts, counting from the last part, and aborts it', async () => {
    const clock = new ManualClock();
    const model = scriptedModel([{ text: 'a b c', hang: true, afterDeltas: 2 }]);
    const parts: ModelPart[] = [];
    let failure: unknown;
    modelCall$(model, request, { timeoutMs: 10_000, scheduler: clock }).subscribe({ next: (p) => parts.push(p), error: (e: unknown) => (failure = e) });
    await until(() => parts.length === 2);
    clock.advanceTo(9_999);
    expect(failure).toBeUndefined();
    clock.advanceTo(10_000);
    expect(failure).toBeInstanceOf(ModelCallTimeoutError);
    expect(model.doStreamCalls[0]?.abortSignal?.aborted).toBe(true);
  });

  it('completes without a timeout error when the answer ends in time', async () => {
    const clock = new ManualClock();
    const { error } = await collect(modelCall$(scriptedModel([{ text: 'quick' }]), request, { timeoutMs: 5, scheduler: clock }));
    expect(error).toBeUndefined();
    expect(clock.actions).toEqual([]); // the timer is gone with the call
  });

  it('refuses a timeout that is not positive', () => {
    expect(() => modelCall$(scriptedModel([]), request, { timeoutMs: 0 })).toThrow('"timeoutMs" must be positive (or Infinity: no timeout), got 0');
  });
});
