import { z } from 'zod';
import type { ClientTool } from '../../reducers/agent-registration/definition.js';
import { defineTool, type AnyTool } from './tool.js';

/** How long a client tool's call waits for the client by default: 10 minutes. */
export const CLIENT_TOOL_TIMEOUT_MS = 600_000;

/**
 * A tool the conversation's client runs (a {@link ClientTool} of an agent definition), as the
 * tool-call effects take it:
 *
 * 1. The model sees its name, description and input schema; the arguments are checked with the
 *    schema compiled by zod (`z.fromJSONSchema`), before the call runs.
 * 2. Running it is waiting: the call stays `executing` until the client dispatches `success{output}`
 *    or `execution_error{error}` to the call's stream (`<root>/agent/<a>/call/<id>`), which ends the
 *    wait, or until `timeoutMs` (default {@link CLIENT_TOOL_TIMEOUT_MS}) ends it with `execution_timeout`.
 * 3. After a restart the wait goes on (`rerunSafe`: waiting runs nothing twice).
 */
export function clientTool(spec: ClientTool): AnyTool {
  return defineTool({
    name: spec.name,
    description: spec.description,
    inputSchema: z.fromJSONSchema(spec.inputSchema as Parameters<typeof z.fromJSONSchema>[0]),
    timeoutMs: spec.timeoutMs ?? CLIENT_TOOL_TIMEOUT_MS,
    rerunSafe: true,
    parallelSafe: true,
    execute: (_input, { signal }) =>
      new Promise<never>((_, reject) => {
        // The client's answer moves the call out of `executing`, which aborts this wait.
        signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
      }),
  });
}
