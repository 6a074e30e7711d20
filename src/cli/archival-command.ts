import { errorText } from '../reducers/error-text.js';
import type { Command } from './args.js';

/** The longest answer read from the server: archive answers list streams, a few KB each way. */
const MAX_ANSWER_BYTES = 1 << 20;

/**
 * `runestream archive <stream>` / `runestream restore <stream>`: a POST to the running server's
 * `/archive/:target` or `/restore/:target`, with the token as `Authorization: Bearer`. Prints the
 * JSON answer on `log.log`; resolves to the exit code: 0 done, 1 refused or unreachable.
 */
export async function archivalCommand(command: Extract<Command, { command: 'archive' | 'restore' }>, log: Pick<Console, 'log' | 'error'>): Promise<number> {
  const url = `${command.url}/${command.command}/${encodeURIComponent(command.target)}`;
  let response: Response;
  try {
    response = await fetch(url, { method: 'POST', headers: command.token === undefined ? {} : { authorization: `Bearer ${command.token}` } });
  } catch (error) {
    log.error(`runestream: cannot reach the server at ${command.url}: ${errorText(error)}`);
    return 1;
  }
  const text = (await response.text()).slice(0, MAX_ANSWER_BYTES);
  let body: { ok?: boolean; code?: string; message?: string } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  if (response.ok && body?.ok === true) {
    log.log(JSON.stringify(body, null, 2));
    return 0;
  }
  log.error(
    body?.code === undefined
      ? `runestream: ${command.command} failed: HTTP ${response.status} ${text}`
      : `runestream: ${command.command} refused: ${body.code}: ${body.message ?? ''}`,
  );
  return 1;
}
