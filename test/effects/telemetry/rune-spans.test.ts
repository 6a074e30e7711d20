import { SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import type { Rune } from '../../../src/index.js';
import { RuneSpans } from '../../../src/effects/telemetry/rune-spans.js';

const turn = 'conv/c1/agent/a1/turn';
const call = 'conv/c1/agent/a1/call/c1';

/** A rune of the log as the engine writes it, at `at` ms of scheduler time. */
const rune = (stream: string, seq: number, at: number, kind: string, event: Rune['event'], from: string | undefined, to: string, payload?: Record<string, unknown>): Rune => ({
  stream,
  seq,
  machine: stream.includes('/call/') ? 'tool-call' : 'turn-engine',
  kind,
  event,
  ...(from === undefined ? {} : { from }),
  to,
  at,
  ...(payload === undefined ? {} : { payload }),
});

function traced(runes: readonly Rune[]): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('test');
  const spans = new RuneSpans(tracer, { captureContent: false, maxOpenSpans: 10 });
  for (const r of runes) spans.take(r);
  return exporter.getFinishedSpans();
}

/** A span's length in ms, from the hrtimes the runes' `at` gave it. */
const lengthMs = (span: ReadableSpan): number => span.duration[0] * 1000 + span.duration[1] / 1e6;

describe('RuneSpans: spans from runes, at the runes’ times', () => {
  it('times spans by the runes’ at: the model call from streaming to its response, the first chunk 250 ms in', () => {
    const spans = traced([
      rune(turn, 2, 1000, 'turn.started', { type: 'start_turn', input: 'hi' }, 'idle', 'streaming', { turnId: '1', input: 'hi' }),
      rune(turn, 3, 1250, 'turn.assistant_delta', { type: 'assistant_delta', content: 'He' }, 'streaming', 'streaming'),
      rune(turn, 4, 1300, 'turn.assistant_delta', { type: 'assistant_delta', content: 'llo' }, 'streaming', 'streaming'),
      rune(
        turn,
        5,
        1500,
        'turn.completed',
        { type: 'response_done', model: 'gpt-x', provider: 'openai.chat', usage: { inputTokens: 9, outputTokens: 2 } },
        'streaming',
        'completed',
        {
          finalOutput: 'Hello',
          usage: { inputTokens: 9, outputTokens: 2, modelCalls: 1, toolCalls: 0, wallClockMs: 0 },
        },
      ),
    ]);
    expect(spans.map((span) => [span.name, lengthMs(span)])).toEqual([
      ['chat gpt-x', 500],
      ['invoke_agent a1', 500],
    ]);
    expect(spans[0]!.attributes).toMatchObject({ 'gen_ai.response.time_to_first_chunk': 0.25, 'gen_ai.provider.name': 'openai', 'gen_ai.usage.input_tokens': 9 });
    expect(spans[0]!.events.map((event) => event.name)).toEqual(['gen_ai.first_chunk']);
  });

  it('marks a tool call that ends in error or timeout as an error, and a denied one not', () => {
    const spawn = (stream: string, callId: string): Rune =>
      rune(stream, 1, 0, 'tool.call', { type: 'spawn', input: { callId, toolName: 'fetch', arguments: { url: 'x' } } }, undefined, 'pending_call');
    const [c2, c3] = ['conv/c1/agent/a1/call/c2', 'conv/c1/agent/a1/call/c3'];
    const spans = traced([
      spawn(call, 'c1'),
      rune(call, 2, 5, 'no_approval_needed', { type: 'no_approval_needed' }, 'pending_call', 'executing'),
      rune(call, 3, 9, 'tool.result', { type: 'execution_error', error: 'boom' }, 'executing', 'error_result', { callId: 'c1', status: 'error', error: 'boom' }),
      spawn(c2, 'c2'),
      rune(c2, 2, 5, 'no_approval_needed', { type: 'no_approval_needed' }, 'pending_call', 'executing'),
      rune(c2, 3, 9, 'tool.result', { type: 'execution_timeout' }, 'executing', 'timeout_result', { callId: 'c2', status: 'timeout' }),
      spawn(c3, 'c3'),
      rune(c3, 2, 5, 'tool.approval_requested', { type: 'requires_approval' }, 'pending_call', 'awaiting_approval', { callId: 'c3' }),
      rune(c3, 3, 9, 'tool.denied', { type: 'denied', reason: 'no' }, 'awaiting_approval', 'denied', { callId: 'c3', reason: 'no' }),
    ]);
    expect(spans.map((span) => [span.attributes['gen_ai.tool.call.id'], span.status.code, span.attributes['error.type'], span.attributes['runestream.outcome']])).toEqual([
      ['c1', SpanStatusCode.ERROR, 'tool_error', 'error'],
      ['c2', SpanStatusCode.ERROR, 'timeout', 'timeout'],
      ['c3', SpanStatusCode.UNSET, undefined, 'denied'],
    ]);
    expect(spans[0]!.status.message).toBe('boom');
    // No turn was open: each call is a root span of its own.
    expect(spans.every((span) => span.parentSpanContext === undefined)).toBe(true);
  });
});
