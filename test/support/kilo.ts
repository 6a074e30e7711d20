import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChatRequest, ScriptedReply } from './chat-completions-server.js';

/**
 * The pinned kilo 7.7.7 binary, from its Linux x64 package (a dev dependency of its own: the
 * `@kilocode/cli` launcher lists platform packages the registry this project installs from lacks,
 * so `npm ci` would refuse its lock file).
 */
export const KILO_BIN = fileURLToPath(new URL('../../node_modules/@kilocode/cli-linux-x64/bin/kilo', import.meta.url));

/**
 * The whole environment of an offline kilo in `scratch` talking to the chat-completions server at
 * `baseURL` as model `local/m` (ECOSYSTEM.md section 6): HOME and XDG folders in the scratch
 * folder, no auto-update, no telemetry, no sharing, edits and commands asked for permission.
 */
export function kiloEnv(scratch: string, baseURL: string): Record<string, string> {
  const config = {
    provider: { local: { npm: '@ai-sdk/openai-compatible', options: { baseURL, apiKey: 'x' }, models: { m: { tool_call: true } } } },
    model: 'local/m',
    share: 'disabled',
    autoupdate: false,
    permission: { edit: 'ask', bash: 'ask' },
  };
  return {
    PATH: process.env.PATH ?? '',
    HOME: join(scratch, 'home'),
    XDG_CONFIG_HOME: join(scratch, 'xdg/config'),
    XDG_DATA_HOME: join(scratch, 'xdg/data'),
    XDG_CACHE_HOME: join(scratch, 'xdg/cache'),
    XDG_STATE_HOME: join(scratch, 'xdg/state'),
    KILO_CONFIG_CONTENT: JSON.stringify(config),
    KILO_DISABLE_AUTOUPDATE: '1',
    KILO_TELEMETRY_LEVEL: 'off',
  };
}

/**
 * The scripted model of the live kilo tests, by what kilo last sent: a title for its title request,
 * "Bye now." to "Now say bye.", a sentence after a tool's result, and otherwise a `write` of
 * `hello.txt` in `cwd` (`bye.txt` when asked to "Write bye.txt").
 */
export function kiloModel(cwd: string): (request: ChatRequest) => ScriptedReply {
  return (request) => {
    if (!Array.isArray(request.tools) || request.tools.length === 0) return { text: 'Scripted title' }; // kilo's title request
    const last = request.messages?.at(-1) as { role?: string } | undefined;
    if (last?.role === 'tool') return { text: 'I created hello.txt.' };
    const said = JSON.stringify(last);
    if (said.includes('Now say bye.')) return { text: 'Bye now.' };
    const file = said.includes('Write bye.txt') ? 'bye.txt' : 'hello.txt';
    return { toolCalls: [{ id: `call_${file}`, name: 'write', arguments: { filePath: join(cwd, file), content: 'hello from kilo\n' } }] };
  };
}
