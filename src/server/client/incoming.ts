import { ServerMessage } from '../protocol.js';
import { ClientError } from './errors.js';
import { errorText } from '../../reducers/error-text.js';
import { describeIssues, parseBounded } from '../../reducers/validate.js';

/** A frame the server sent: the protocol message it holds, or why it is not one. */
export type IncomingFrame = { ok: true; message: ServerMessage } | { ok: false; error: ClientError };

/** The start of a frame, for error messages. */
const excerpt = (text: string): string => (text.length > 120 ? `${JSON.stringify(text.slice(0, 120))}...` : JSON.stringify(text));

const invalid = (message: string): IncomingFrame => ({ ok: false, error: new ClientError('invalid_server_message', message) });

/**
 * Reads one frame from the server: a text frame holding JSON that `ServerMessage` accepts.
 * Never throws; a frame that is not such a message comes back as an `invalid_server_message` error.
 */
export function readServerFrame(data: unknown): IncomingFrame {
  if (typeof data !== 'string') return invalid(`the server sent a binary frame; the protocol is text (JSON) only`);
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch (error) {
    return invalid(`the server sent a frame that is not JSON (${errorText(error)}): ${excerpt(data)}`);
  }
  const parsed = parseBounded(ServerMessage, json);
  if (!parsed.success) {
    return invalid(`the server sent a frame that is not a message of the protocol: ${describeIssues(parsed.issues, parsed.partial)} in ${excerpt(data)}`);
  }
  return { ok: true, message: parsed.data };
}
