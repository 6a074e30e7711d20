import { describeIssues, parseBounded } from '../reducers/validate.js';
import {
  CLIENT_OPS,
  DispatchMessage,
  SpawnMessage,
  SubscribeMessage,
  UnsubscribeMessage,
  type ClientMessage,
  type ErrorMessage,
  type ProtocolErrorCode,
  type ServerMessage,
} from './protocol.js';
import { errorText } from '../reducers/error-text.js';

/** A server message as the bytes of one text frame (bytes, so `ws` never re-encodes a shared frame). */
export const encodeMessage = (message: ServerMessage): Buffer => Buffer.from(JSON.stringify(message));

/** What an error is about: the request's `id` and the `stream` it named, when usable. */
export interface ErrorSubject {
  readonly id?: string | number | undefined;
  readonly stream?: string | undefined;
}

/** An `error` message, echoing `id` and `stream` when there are any. */
export function errorMessage(code: ProtocolErrorCode, message: string, about: ErrorSubject = {}): ErrorMessage {
  const error: ErrorMessage = { op: 'error', code, message };
  if (about.id !== undefined) error.id = about.id;
  if (about.stream !== undefined) error.stream = about.stream;
  return error;
}

/** A text frame read as a client message, or the error to answer it with. */
export type DecodedFrame = { ok: true; message: ClientMessage } | { ok: false; error: ErrorMessage };

const SCHEMAS = { spawn: SpawnMessage, dispatch: DispatchMessage, subscribe: SubscribeMessage, unsubscribe: UnsubscribeMessage } as const;
const RequestId = SpawnMessage.shape.id;
const StreamId = SpawnMessage.shape.stream;

const describeJson = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`);

/** The `id` and `stream` of a frame that failed, when they are valid on their own: echoed in its error. */
function subjectOf(value: Record<string, unknown>): ErrorSubject {
  const id = RequestId.safeParse(value.id);
  const stream = StreamId.safeParse(value.stream);
  return { id: id.success ? id.data : undefined, stream: stream.success ? stream.data : undefined };
}

/**
 * Reads one frame as a client message. Each check returns early with a stable code: a binary
 * frame (`binary_frame`), a frame over `maxFrameBytes` (`frame_too_large`, before parsing it),
 * not JSON (`invalid_json`), not an object with a string `op` (`invalid_message`), an op this
 * server does not know (`unknown_op`, listing the ops), and a schema miss (`invalid_message`,
 * naming each failing field). Never throws.
 */
export function decodeFrame(data: Buffer, isBinary: boolean, maxFrameBytes: number): DecodedFrame {
  const refuse = (code: ProtocolErrorCode, message: string, about?: ErrorSubject): DecodedFrame => ({
    ok: false,
    error: errorMessage(code, message, about),
  });
  if (isBinary) return refuse('binary_frame', 'binary frames are not supported: send each message as a JSON text frame');
  if (data.length > maxFrameBytes) {
    return refuse('frame_too_large', `a frame of ${data.length} bytes is over the limit of ${maxFrameBytes} bytes (maxFrameBytes)`);
  }
  let value: unknown;
  try {
    value = JSON.parse(data.toString('utf8'));
  } catch (error) {
    return refuse('invalid_json', `invalid JSON: ${errorText(error)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return refuse('invalid_message', `(root): expected a JSON object with an "op", got ${describeJson(value)}`);
  }
  const record = value as Record<string, unknown>;
  const about = subjectOf(record);
  const { op } = record;
  if (typeof op !== 'string') {
    return refuse('invalid_message', `op: expected one of ${CLIENT_OPS.join(', ')}, got ${op === undefined ? 'none' : describeJson(op)}`, about);
  }
  if (!Object.hasOwn(SCHEMAS, op)) {
    return refuse('unknown_op', `unknown op ${JSON.stringify(op.slice(0, 64))}; the ops are ${CLIENT_OPS.join(', ')}`, about);
  }
  const parsed = parseBounded<ClientMessage>(SCHEMAS[op as keyof typeof SCHEMAS], value);
  if (!parsed.success) return refuse('invalid_message', `invalid "${op}" message: ${describeIssues(parsed.issues, parsed.partial)}`, about);
  // The event as sent, not the schema's copy, which drops an own `__proto__` key: the engine checks
  // the whole event itself and refuses one.
  if (parsed.data.op === 'dispatch') parsed.data.event = record.event as DispatchMessage['event'];
  return { ok: true, message: parsed.data };
}
