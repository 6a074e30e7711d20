import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The pinned `@kilocode/cli@7.7.7` launcher. */
export const KILO_BIN = fileURLToPath(new URL('../../node_modules/.bin/kilo', import.meta.url));

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
