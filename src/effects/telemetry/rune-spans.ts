import { SpanKind, SpanStatusCode, context as otelContext, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { isRuneOf, type Rune, type RuneOf } from '../../reducers/rune.js';
import { agentStreams, parseStreamId } from '../../reducers/stream-ids.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallInput } from '../../reducers/tool-call/schema.js';
import { turnEndingOf, turnEngine } from '../../reducers/turn-engine/machine.js';
import { FINISH_REASON, FIRST_CHUNK_EVENT, GEN_AI, assistantMessages, providerName, usageAttributes, userMessages } from './gen-ai.js';

/** What {@link RuneSpans} needs besides its tracer. */
export interface RuneSpansOptions {
  /** Prompts, answers, tool arguments and results as span attributes (the conventions' opt-in content). */
  readonly captureContent: boolean;
  /** Turns and tool calls with a span open at once; past it, the oldest is ended. */
  readonly maxOpenSpans: number;
  /** Spans rebuilt from the log after a restart: each carries `runestream.span.replayed: true`. */
  readonly replayed?: boolean;
}

/** One model call of a turn: a `chat` span, open while the turn streams. */
interface OpenChat {
  readonly span: Span;
  readonly startedAt: number;
  firstChunk: boolean;
  /** The text streamed so far, kept only with `captureContent`. */
  text: string;
}

/** An agent's turn in progress: its `invoke_agent` span, the context its children start in, its model call. */
interface OpenTurn {
  readonly type: 'turn';
  readonly span: Span;
  readonly context: Context;
  readonly conversation: string;
  chat: OpenChat | undefined;
}

/** A tool call in progress: its `execute_tool` span. */
interface OpenTool {
  readonly type: 'tool';
  readonly span: Span;
}

type TurnRune = RuneOf<typeof turnEngine>;
type ToolRune = RuneOf<typeof toolCall>;

const TOOL_ENDS: ReadonlySet<string> = new Set(toolCall.terminal);
/** Tool-call rune kinds that become events of the call's span: its approval and its claim. */
const TOOL_EVENTS: ReadonlySet<string> = new Set(['tool.approval_requested', 'tool.approved', 'tool.denied', 'tool.claimed', 'no_approval_needed']);
/** How a failed tool call's span is marked: `error.type` by the state it ended in. */
const TOOL_ERRORS: Readonly<Record<string, string>> = { error_result: 'tool_error', timeout_result: 'timeout' };

/**
 * The payload fields events carry, under `runestream.`: who and why, never content (an
 * interruption's `partialOutput` and `steerInput` are what was said, so they stay out).
 */
const EVENT_FIELDS = ['reason', 'policyReason', 'approver', 'claim', 'attempt', 'supersedes'] as const;

/** A rune payload's {@link EVENT_FIELDS} as event attributes. */
function payloadAttributes(payload: Record<string, unknown> | undefined): Attributes {
  const attributes: Attributes = {};
  for (const key of EVENT_FIELDS) {
    const value = payload?.[key];
    if (typeof value === 'string' || typeof value === 'number') attributes[`runestream.${key}`] = value;
  }
  return attributes;
}

/**
 * The spans the agent machines' runes describe, kept in step with them rune by rune: the one place
 * spans come from. A turn stream's `turn.started` opens `invoke_agent {agent}`; each time the turn
 * enters `streaming` a `chat {model}` child opens, and the response's rune (`tool_calls_received` /
 * `response_done`, carrying model, provider and usage) or the turn's end closes it; a `tool-call`
 * stream's spawn opens `execute_tool {tool}` under its agent's open turn, and its outcome closes it.
 *
 * Open spans are held in one map of at most `maxOpenSpans` turns and calls: a span whose run this
 * process never sees end (its stream moved to another process, or was abandoned) is ended, marked
 * `runestream.span.cut_short: evicted`, when the map is full. A run that started before this
 * process did (a restart) gets no live span: {@link RuneSpans.endsUnseenRun} tells its end, for
 * the tracing epic to rebuild it from the log.
 */
export class RuneSpans {
  /** Open turns and tool calls by stream, oldest first (a Map keeps insertion order). */
  readonly #open = new Map<string, OpenTurn | OpenTool>();
  /** What every span started here carries besides its own attributes. */
  readonly #marker: Attributes;

  constructor(
    private readonly tracer: Pick<Tracer, 'startSpan'>,
    private readonly options: RuneSpansOptions,
  ) {
    this.#marker = options.replayed === true ? { [GEN_AI.replayed]: true } : {};
  }

  /**
   * Whether `rune` ends a run (a turn, a tool call) whose span is not open here: it started
   * before this process took the stream on (a restart, a takeover). Ask before {@link take}.
   */
  endsUnseenRun(rune: Rune): boolean {
    if (rune.to === undefined || rune.from === undefined || this.#open.has(rune.stream)) return false;
    if (isRuneOf(turnEngine, rune)) return turnEndingOf(rune) !== undefined && parseStreamId(rune.stream)?.kind === 'turn';
    return isRuneOf(toolCall, rune) && TOOL_ENDS.has(rune.to) && parseStreamId(rune.stream)?.kind === 'call';
  }

  /** How many turns and tool calls have a span open. */
  get size(): number {
    return this.#open.size;
  }

  /** Takes one live rune. */
  take(rune: Rune): void {
    if (isRuneOf(turnEngine, rune)) this.#turn(rune);
    else if (isRuneOf(toolCall, rune)) this.#toolCall(rune);
  }

  /**
   * Ends every open span at `at`, marked `runestream.span.cut_short: unfinished`: the engine is
   * closing. A span that fails to end is passed to `failed`, and the others are ended still.
   */
  endAll(at: number, failed: (stream: string, error: unknown) => void): void {
    for (const stream of [...this.#open.keys()]) {
      try {
        this.#cutShort(stream, 'unfinished', at);
      } catch (error) {
        failed(stream, error);
      }
    }
  }

  #turn(rune: TurnRune): void {
    const { event, stream } = rune;
    if (event.type === 'assistant_delta') {
      const chat = this.#openTurn(stream)?.chat;
      if (chat === undefined) return;
      if (!chat.firstChunk) {
        chat.firstChunk = true;
        chat.span.setAttribute(GEN_AI.timeToFirstChunk, Math.max(0, rune.at - chat.startedAt) / 1000);
        chat.span.addEvent(FIRST_CHUNK_EVENT, rune.at);
      }
      if (this.options.captureContent) chat.text += event.content;
      return;
    }
    if (rune.kind === 'turn.started') this.#startTurn(rune);
    const turn = this.#openTurn(stream);
    if (turn === undefined) return;
    switch (event.type) {
      case 'start_turn':
        break;
      case 'model_call_spent':
        // An empty answer the chain fell over from: the call goes on, with the next provider.
        turn.chat?.span.addEvent(rune.kind, payloadAttributes(rune.payload), rune.at);
        break;
      case 'tools_finished':
        turn.span.addEvent(rune.kind, { [GEN_AI.callIds]: (rune.payload?.callIds as string[] | undefined) ?? [] }, rune.at);
        break;
      case 'tool_calls_received':
        this.#endChat(turn, rune.at, {
          ...this.#response(event),
          ...(this.options.captureContent ? { [GEN_AI.outputMessages]: assistantMessages(turn.chat?.text ?? '', event.calls ?? [], FINISH_REASON.toolCalls) } : {}),
          [GEN_AI.finishReasons]: [FINISH_REASON.toolCalls],
        });
        turn.span.addEvent(rune.kind, { [GEN_AI.callIds]: event.callIds }, rune.at);
        break;
      case 'response_done':
        this.#endChat(turn, rune.at, {
          ...this.#response(event),
          ...(this.options.captureContent ? { [GEN_AI.outputMessages]: assistantMessages(turn.chat?.text ?? '', [], FINISH_REASON.stop) } : {}),
          [GEN_AI.finishReasons]: [FINISH_REASON.stop],
        });
        break;
      case 'stream_error':
      case 'tool_crash':
        this.#fail(turn.chat?.span, event.type, event.error);
        this.#endChat(turn, rune.at, {});
        break;
      default:
        // interrupt, steer: the model call (if any) is cut off, and said so on the turn.
        if (turn.chat !== undefined) turn.chat.span.setAttribute(GEN_AI.outcome, 'interrupted');
        this.#endChat(turn, rune.at, {});
        turn.span.addEvent(rune.kind, payloadAttributes(rune.payload), rune.at);
    }
    if (rune.to === 'streaming' && turn.chat === undefined) this.#startChat(turn, rune.at);
    else if (turnEndingOf(rune) !== undefined) this.#endTurn(stream, turn, rune);
  }

  #startTurn(rune: TurnRune): void {
    const parts = parseStreamId(rune.stream);
    if (parts?.kind !== 'turn') return;
    this.#cutShort(rune.stream, 'evicted', rune.at); // a turn left open (its end never seen) ends here
    this.#makeRoom(rune.at);
    const input = String((rune.event as { input?: unknown }).input ?? '');
    const span = this.tracer.startSpan(`invoke_agent ${parts.agentId}`, {
      kind: SpanKind.INTERNAL,
      startTime: rune.at,
      attributes: {
        ...this.#marker,
        [GEN_AI.operation]: 'invoke_agent',
        [GEN_AI.agentId]: parts.agentId,
        [GEN_AI.agentName]: parts.agentId,
        [GEN_AI.conversationId]: parts.root,
        [GEN_AI.stream]: rune.stream,
        [GEN_AI.turn]: String(rune.payload?.turnId ?? ''),
        ...(this.options.captureContent ? { [GEN_AI.inputMessages]: userMessages(input) } : {}),
      },
    });
    this.#open.set(rune.stream, { type: 'turn', span, context: trace.setSpan(otelContext.active(), span), conversation: parts.root, chat: undefined });
  }

  #startChat(turn: OpenTurn, at: number): void {
    const span = this.tracer.startSpan(
      'chat',
      { kind: SpanKind.CLIENT, startTime: at, attributes: { ...this.#marker, [GEN_AI.operation]: 'chat', [GEN_AI.conversationId]: turn.conversation } },
      turn.context,
    );
    turn.chat = { span, startedAt: at, firstChunk: false, text: '' };
  }

  /** What a response's rune says of the call: the model that answered, its provider, its usage. */
  #response(event: { model?: string | undefined; provider?: string | undefined; usage?: unknown }): Attributes {
    return {
      ...(event.model === undefined ? {} : { [GEN_AI.requestModel]: event.model, [GEN_AI.responseModel]: event.model }),
      ...(event.provider === undefined ? {} : { [GEN_AI.provider]: providerName(event.provider) }),
      ...usageAttributes(event.usage),
    };
  }

  #endChat(turn: OpenTurn, at: number, attributes: Attributes): void {
    const { chat } = turn;
    if (chat === undefined) return;
    turn.chat = undefined;
    const model = attributes[GEN_AI.requestModel];
    if (typeof model === 'string') chat.span.updateName(`chat ${model}`);
    chat.span.setAttributes(attributes);
    chat.span.end(at);
  }

  #endTurn(stream: string, turn: OpenTurn, rune: TurnRune): void {
    this.#open.delete(stream);
    const payload = rune.payload as { finalOutput?: string; usage?: unknown; message?: string; errorType?: string } | undefined;
    const ending = turnEndingOf(rune)!;
    turn.span.setAttribute(GEN_AI.outcome, ending);
    if (ending === 'completed') {
      turn.span.setAttributes(usageAttributes(payload?.usage));
      if (this.options.captureContent) turn.span.setAttribute(GEN_AI.outputMessages, assistantMessages(payload?.finalOutput ?? '', [], FINISH_REASON.stop));
    } else if (ending === 'error') this.#fail(turn.span, payload?.errorType ?? 'error', payload?.message ?? '');
    turn.span.end(rune.at);
  }

  #toolCall(rune: ToolRune): void {
    const { stream } = rune;
    if (rune.event.type === 'spawn') {
      this.#startTool(rune, rune.event.input as ToolCallInput);
      return;
    }
    const open = this.#open.get(stream);
    if (open?.type !== 'tool') return;
    if (TOOL_EVENTS.has(rune.kind)) open.span.addEvent(rune.kind, payloadAttributes(rune.payload), rune.at);
    if (rune.to === undefined || !TOOL_ENDS.has(rune.to)) return;
    this.#open.delete(stream);
    const status = rune.to === 'denied' ? 'denied' : String(rune.payload?.status ?? rune.to);
    open.span.setAttribute(GEN_AI.outcome, status);
    const errorType = TOOL_ERRORS[rune.to];
    if (errorType !== undefined) this.#fail(open.span, errorType, String(rune.payload?.error ?? status));
    if (this.options.captureContent && rune.payload !== undefined && 'output' in rune.payload) open.span.setAttribute(GEN_AI.toolResult, JSON.stringify(rune.payload.output));
    open.span.end(rune.at);
  }

  #startTool(rune: ToolRune, input: ToolCallInput): void {
    const parts = parseStreamId(rune.stream);
    if (parts?.kind !== 'call') return;
    this.#makeRoom(rune.at);
    // The call is a child of its agent's turn: `<root>/agent/<a>/call/<id>` under `<root>/agent/<a>/turn`.
    const turn = this.#openTurn(agentStreams(parts.root, parts.agentId).turn);
    const span = this.tracer.startSpan(
      `execute_tool ${input.toolName}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: rune.at,
        attributes: {
          ...this.#marker,
          [GEN_AI.operation]: 'execute_tool',
          [GEN_AI.toolName]: input.toolName,
          [GEN_AI.toolCallId]: input.callId,
          [GEN_AI.toolType]: 'function',
          [GEN_AI.conversationId]: parts.root,
          [GEN_AI.stream]: rune.stream,
          ...(this.options.captureContent ? { [GEN_AI.toolArguments]: JSON.stringify(input.arguments) } : {}),
        },
      },
      turn?.context ?? otelContext.active(),
    );
    this.#open.set(rune.stream, { type: 'tool', span });
  }

  #openTurn(stream: string): OpenTurn | undefined {
    const open = this.#open.get(stream);
    return open?.type === 'turn' ? open : undefined;
  }

  /** Marks a span failed: status ERROR with the message, and the conventions' low-cardinality `error.type`. */
  #fail(span: Span | undefined, errorType: string, message: string): void {
    span?.setStatus({ code: SpanStatusCode.ERROR, message });
    span?.setAttribute(GEN_AI.errorType, errorType);
  }

  /** Ends the oldest open spans until one more fits. */
  #makeRoom(at: number): void {
    for (const stream of this.#open.keys()) {
      if (this.#open.size < this.options.maxOpenSpans) return;
      this.#cutShort(stream, 'evicted', at);
    }
  }

  #cutShort(stream: string, why: 'evicted' | 'unfinished', at: number): void {
    const open = this.#open.get(stream);
    if (open === undefined) return;
    this.#open.delete(stream);
    if (open.type === 'turn' && open.chat !== undefined) {
      open.chat.span.setAttribute(GEN_AI.cutShort, why);
      open.chat.span.end(at);
    }
    open.span.setAttribute(GEN_AI.cutShort, why);
    open.span.end(at);
  }
}
