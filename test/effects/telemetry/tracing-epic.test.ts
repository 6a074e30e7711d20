import { SpanStatusCode, type Tracer } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { filter, firstValueFrom } from 'rxjs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel, tracingEpic, type ScriptEntry, type TracingOptions } from '../../../src/agents.js';
import { agentStreams, createEngine, type Engine, type EngineError, type TurnEngineState } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';

const engines: Engine[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const a = agentStreams('conv/c1', 'a1');

const note = (needsApproval: boolean) =>
  defineTool({
    name: 'write_note',
    description: 'Writes a note',
    inputSchema: z.object({ text: z.string() }),
    needsApproval,
    execute: ({ text }) => ({ saved: text }),
  });

/** One turn: the model asks for write_note, then answers once it has the result. */
const toolThenAnswer: ScriptEntry[] = [
  { text: 'Let me save it.', toolCalls: [{ toolName: 'write_note', input: { text: 'milk' }, toolCallId: 'n1' }], usage: { inputTokens: 12, outputTokens: 5 } },
  { text: 'Saved.', usage: { inputTokens: 20, outputTokens: 2 } },
];

function traced(script: ScriptEntry[], tracing: TracingOptions, needsApproval = false): { engine: Engine; errors: EngineError[] } {
  const engine = createEngine({ epics: [...agentEpics({ model: scriptedModel(script), tools: [note(needsApproval)] }), tracingEpic(tracing)] });
  engines.push(engine);
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  return { engine, errors };
}

function inMemoryTracer(...processors: SpanProcessor[]): { tracer: Tracer; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [...processors, new SimpleSpanProcessor(exporter)] });
  return { tracer: provider.getTracer('test'), exporter };
}

async function runTurn(engine: Engine, input: string, turn = 1, stream = a.turn): Promise<TurnEngineState> {
  if (turn === 1) await engine.spawn(stream, 'turn-engine');
  const started = await engine.dispatch(stream, { type: 'start_turn', input });
  expect(started.accepted).toBe(true);
  return firstValueFrom(engine.state$<TurnEngineState>(stream).pipe(filter((s) => s.value === 'idle' && s.turn === turn)));
}

const named = (spans: readonly ReadableSpan[], name: string): ReadableSpan[] => spans.filter((span) => span.name === name);
const one = (spans: readonly ReadableSpan[], name: string): ReadableSpan => {
  const found = named(spans, name);
  expect(found.map((span) => span.name)).toEqual([name]);
  return found[0]!;
};
const parentOf = (span: ReadableSpan): string | undefined => span.parentSpanContext?.spanId;
const idOf = (span: ReadableSpan): string => span.spanContext().spanId;
const eventNames = (span: ReadableSpan): string[] => span.events.map((event) => event.name);
const contentKeys = (span: ReadableSpan): string[] => Object.keys(span.attributes).filter((key) => /messages|arguments|result/.test(key));

describe('tracingEpic: OpenTelemetry spans from the runes', () => {
  it('traces one turn with an approved tool call as invoke_agent, its chat calls and execute_tool, with the GenAI attributes and events, and no content by default', async () => {
    const { tracer, exporter } = inMemoryTracer();
    const { engine, errors } = traced(toolThenAnswer, { tracer }, true);
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'note: milk' });
    await firstValueFrom(engine.runes$(a.call('n1')).pipe(filter((r) => r.to === 'awaiting_approval')));
    await engine.dispatch(a.call('n1'), { type: 'approved', approver: 'alice' });
    await firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));

    const spans = exporter.getFinishedSpans();
    const turn = one(spans, 'invoke_agent a1');
    const chats = named(spans, 'chat scripted-model');
    const tool = one(spans, 'execute_tool write_note');
    expect(spans).toHaveLength(4);
    expect(chats).toHaveLength(2);

    // The tree: the turn is the root; both model calls and the tool call are its children, in one trace.
    expect(parentOf(turn)).toBeUndefined();
    for (const child of [...chats, tool]) {
      expect(parentOf(child)).toBe(idOf(turn));
      expect(child.spanContext().traceId).toBe(turn.spanContext().traceId);
    }
    expect(turn.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.id': 'a1',
      'gen_ai.conversation.id': 'conv/c1',
      'gen_ai.usage.input_tokens': 32,
      'gen_ai.usage.output_tokens': 7,
      'runestream.outcome': 'completed',
      'runestream.stream': a.turn,
    });
    expect(eventNames(turn)).toEqual(['turn.tool_calls_received', 'turn.tools_finished']);
    expect(turn.events[0]!.attributes).toEqual({ 'runestream.tool.call_ids': ['n1'] });

    // Told apart by how each response ended: the tool round's, then the answer's.
    const [first, second] = ['tool_call', 'stop'].map((reason) => chats.find((chat) => (chat.attributes['gen_ai.response.finish_reasons'] as string[])[0] === reason));
    expect(first!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'scripted',
      'gen_ai.request.model': 'scripted-model',
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['tool_call'],
    });
    expect(second!.attributes).toMatchObject({ 'gen_ai.usage.input_tokens': 20, 'gen_ai.usage.output_tokens': 2, 'gen_ai.response.finish_reasons': ['stop'] });
    for (const chat of chats) {
      expect(eventNames(chat)).toEqual(['gen_ai.first_chunk']);
      expect(chat.attributes['gen_ai.response.time_to_first_chunk']).toBeGreaterThanOrEqual(0);
      expect(chat.status.code).toBe(SpanStatusCode.UNSET);
    }

    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'write_note',
      'gen_ai.tool.call.id': 'n1',
      'runestream.outcome': 'success',
    });
    expect(eventNames(tool)).toEqual(['tool.approval_requested', 'tool.approved', 'tool.claimed']);
    expect(tool.events[1]!.attributes).toEqual({ 'runestream.approver': 'alice' });

    // Content is opt-in: no prompt, answer, arguments or result anywhere.
    expect(spans.flatMap(contentKeys)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('records prompts, answers, tool arguments and results in the conventions’ form with captureContent', async () => {
    const { tracer, exporter } = inMemoryTracer();
    const { engine } = traced(toolThenAnswer, { tracer, captureContent: true });
    await runTurn(engine, 'note: milk');

    const spans = exporter.getFinishedSpans();
    const turn = one(spans, 'invoke_agent a1');
    expect(JSON.parse(turn.attributes['gen_ai.input.messages'] as string)).toEqual([{ role: 'user', parts: [{ type: 'text', content: 'note: milk' }] }]);
    expect(JSON.parse(turn.attributes['gen_ai.output.messages'] as string)).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: 'Let me save it.Saved.' }], finish_reason: 'stop' },
    ]);
    const outputs = named(spans, 'chat scripted-model').map((chat) => JSON.parse(chat.attributes['gen_ai.output.messages'] as string));
    expect(outputs).toContainEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'text', content: 'Let me save it.' },
          { type: 'tool_call', id: 'n1', name: 'write_note', arguments: { text: 'milk' } },
        ],
        finish_reason: 'tool_call',
      },
    ]);
    expect(outputs).toContainEqual([{ role: 'assistant', parts: [{ type: 'text', content: 'Saved.' }], finish_reason: 'stop' }]);
    const tool = one(spans, 'execute_tool write_note');
    expect(JSON.parse(tool.attributes['gen_ai.tool.call.arguments'] as string)).toEqual({ text: 'milk' });
    expect(JSON.parse(tool.attributes['gen_ai.tool.call.result'] as string)).toEqual({ saved: 'milk' });
  });

  it('marks a failed model call and its turn as errors, with error.type and the reason', async () => {
    const { tracer, exporter } = inMemoryTracer();
    const { engine } = traced([{ error: 'model down' }], { tracer });
    const state = await runTurn(engine, 'hello?');
    expect(state.error).toContain('model down');

    const spans = exporter.getFinishedSpans();
    const turn = one(spans, 'invoke_agent a1');
    const chat = one(spans, 'chat');
    expect(parentOf(chat)).toBe(idOf(turn));
    for (const span of [chat, turn]) {
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.status.message).toContain('model down');
      expect(span.attributes['error.type']).toBe('stream_error');
    }
    expect(turn.attributes['runestream.outcome']).toBe('error');
  });

  it('ends an interrupted turn and its model call, with the reason but not the words streamed before it', async () => {
    const { tracer, exporter } = inMemoryTracer();
    const { engine } = traced([{ text: 'secret plans', hang: true, afterDeltas: 1 }], { tracer });
    await engine.spawn(a.turn, 'turn-engine');
    const streamed = firstValueFrom(engine.runes$(a.turn).pipe(filter((r) => r.kind === 'turn.assistant_delta')));
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'plan' });
    await streamed;
    await engine.dispatch(a.turn, { type: 'interrupt', reason: 'user stop' });

    const spans = exporter.getFinishedSpans();
    const chat = one(spans, 'chat');
    const turn = one(spans, 'invoke_agent a1');
    expect([chat.attributes['runestream.outcome'], turn.attributes['runestream.outcome']]).toEqual(['interrupted', 'interrupted']);
    expect(eventNames(chat)).toEqual(['gen_ai.first_chunk']);
    expect(turn.events.map((event) => [event.name, event.attributes])).toEqual([['turn.interrupted', { 'runestream.reason': 'user stop' }]]);
    expect(turn.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('rebuilds from the log, marked replayed, the spans of a turn that started before a restart and ended after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runestream-tracing-'));
    dirs.push(dir);
    const path = join(dir, 'log.db');
    const { tracer, exporter } = inMemoryTracer();
    const before = createEngine({
      store: sqliteStore(path),
      epics: [...agentEpics({ model: scriptedModel([{ text: 'half done', hang: true, afterDeltas: 1 }]) }), tracingEpic({ tracer })],
    });
    await before.spawn(a.turn, 'turn-engine');
    const streamed = firstValueFrom(before.runes$(a.turn).pipe(filter((r) => r.kind === 'turn.assistant_delta')));
    await before.dispatch(a.turn, { type: 'start_turn', input: 'go' });
    await streamed;
    await before.close();
    // What was open when the process stopped was ended then, said to be unfinished.
    expect(exporter.getFinishedSpans().map((span) => [span.name, span.attributes['runestream.span.cut_short']])).toEqual([
      ['chat', 'unfinished'],
      ['invoke_agent a1', 'unfinished'],
    ]);
    exporter.reset();

    // After the restart the turn is interrupted ("interrupted by restart"): its whole run is traced again from the log.
    const after = createEngine({ store: sqliteStore(path), epics: [...agentEpics({ model: scriptedModel([]) }), tracingEpic({ tracer })] });
    engines.push(after);
    await vi.waitFor(() => expect(exporter.getFinishedSpans()).toHaveLength(2));
    const spans = exporter.getFinishedSpans();
    const turn = one(spans, 'invoke_agent a1');
    const chat = one(spans, 'chat');
    expect(parentOf(chat)).toBe(idOf(turn));
    for (const span of spans) expect(span.attributes).toMatchObject({ 'runestream.span.replayed': true, 'runestream.outcome': 'interrupted' });
    expect(eventNames(chat)).toEqual(['gen_ai.first_chunk']);
    expect(turn.events.map((event) => [event.name, event.attributes])).toEqual([['turn.interrupted', { 'runestream.reason': 'interrupted by restart' }]]);
  });

  it('keeps the engine and the turns going when the tracer throws, reporting each failure as the tracing epic’s', async () => {
    const throwing = {
      startSpan: () => {
        throw new Error('tracer down');
      },
      startActiveSpan: () => {
        throw new Error('tracer down');
      },
    } as unknown as Tracer;
    const { engine, errors } = traced(toolThenAnswer, { tracer: throwing });
    const state = await runTurn(engine, 'note: milk');
    expect(state.output).toBe('Let me save it.Saved.');
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.every((error) => error.type === 'effect_failed' && error.epic === 'tracing' && String(error.error).includes('tracer down'))).toBe(true);
  });

  it('keeps the engine going when a span processor and the exporter throw, and traces the next turn', async () => {
    let ends = 0;
    const throwingProcessor: SpanProcessor = {
      onStart: () => {},
      onEnd: () => {
        ends++;
        throw new Error('processor down');
      },
      forceFlush: async () => {},
      shutdown: async () => {},
    };
    let exports = 0;
    const exporter = new InMemorySpanExporter();
    exporter.export = () => {
      exports++;
      throw new Error('exporter down');
    };
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), throwingProcessor] });
    const { engine, errors } = traced([...toolThenAnswer, { text: 'Again.' }], { tracer: provider.getTracer('test') });
    expect((await runTurn(engine, 'note: milk')).output).toBe('Let me save it.Saved.');
    expect((await runTurn(engine, 'again', 2)).output).toBe('Again.');
    // Every span of both turns was ended (turn 1: chat, tool, chat, turn; turn 2: chat, turn):
    // tracing went on after each failure, and each failure was reported once.
    expect([ends, exports]).toEqual([6, 6]);
    expect(errors).toHaveLength(6);
    expect(errors.every((error) => error.type === 'effect_failed' && error.epic === 'tracing' && String(error.error).includes('processor down'))).toBe(true);
  });

  it('holds at most maxOpenSpans open: the oldest is ended as evicted, and what is open when the engine closes as unfinished', async () => {
    const { tracer, exporter } = inMemoryTracer();
    const { engine } = traced([{ hang: true }, { hang: true }], { tracer, maxOpenSpans: 1 });
    const b = agentStreams('conv/c2', 'b1');
    for (const stream of [a.turn, b.turn]) {
      await engine.spawn(stream, 'turn-engine');
      await engine.dispatch(stream, { type: 'start_turn', input: 'wait' });
    }
    const evicted = exporter.getFinishedSpans();
    expect(evicted.map((span) => [span.name, span.attributes['runestream.span.cut_short']])).toEqual([
      ['chat', 'evicted'],
      ['invoke_agent a1', 'evicted'],
    ]);
    await engine.close();
    expect(
      exporter
        .getFinishedSpans()
        .slice(2)
        .map((span) => [span.name, span.attributes['runestream.span.cut_short']]),
    ).toEqual([
      ['chat', 'unfinished'],
      ['invoke_agent b1', 'unfinished'],
    ]);
  });

  it('refuses bad options, naming them', () => {
    expect(() => tracingEpic({ maxOpenSpans: 0 })).toThrow('tracingEpic: "maxOpenSpans" must be a positive integer, got 0');
    expect(() => tracingEpic({ captureContent: 'yes' as unknown as boolean })).toThrow('tracingEpic: "captureContent" must be a boolean, got yes');
    expect(() => tracingEpic({ tracer: {} as Tracer })).toThrow('tracingEpic: "tracer" must be an OpenTelemetry Tracer (with startSpan)');
  });
});
