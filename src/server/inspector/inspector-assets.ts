import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { replyError } from '../http-reply.js';
import { compileRoute, type CompiledRoute } from '../routes.js';

/**
 * Where `npm run build:inspector` writes the page: `dist/inspector` of the package, reached the
 * same way from `src/server/inspector` (a checkout) and `dist/server/inspector` (a build).
 */
export const INSPECTOR_DIR = fileURLToPath(new URL('../../../dist/inspector/', import.meta.url));

/** The page's files, each with its content type: nothing else is ever read from disk. */
const ASSETS: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'inspector.js': 'text/javascript; charset=utf-8',
  'inspector.css': 'text/css; charset=utf-8',
  'inspector.js.map': 'application/json; charset=utf-8',
};

/**
 * Where the page may connect: its own origin only, the HTTP API (`'self'`) and the WebSocket on
 * the same host and port (`ws:` / `wss:`, named in full: browsers before CSP 3 do not count them as
 * `'self'`). A `Host` that is not a plain host[:port] gets `'self'` alone.
 */
function connectSrc(host: string | undefined): string {
  let parsed = '';
  try {
    parsed = host === undefined ? '' : new URL(`http://${host}`).host;
  } catch {
    // not a host: 'self' alone
  }
  return parsed === '' || parsed !== host?.toLowerCase() ? "'self'" : `'self' ws://${parsed} wss://${parsed}`;
}

/**
 * The headers of every file of the page: it runs its own script, talks to its own origin only, and
 * is never shown in a frame (`frame-ancestors 'none'`, and `X-Frame-Options: DENY` for browsers
 * without CSP 2), so no other site can lay it under its own buttons and borrow a click.
 */
export function pageHeaders(host: string | undefined): Record<string, string> {
  return {
    'content-security-policy': `default-src 'self'; connect-src ${connectSrc(host)}; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'`,
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
  };
}

/** Answers one of the page's files, or 503 `inspector_not_built` saying how to build it. */
async function sendAsset(res: ServerResponse, file: string, dir: string): Promise<void> {
  let body: Buffer;
  try {
    body = await readFile(`${dir}${file}`);
  } catch {
    return replyError(res, 503, 'inspector_not_built', `the inspector's page is not built (no ${dir}${file}): run "npm run build:inspector" in the runestream checkout`);
  }
  res.writeHead(200, {
    'content-type': ASSETS[file]!,
    'content-length': body.length,
    'cache-control': 'no-cache',
    ...pageHeaders(res.req.headers.host),
  });
  res.end(body);
}

/**
 * The page (`GET /`) and its files (`GET /inspector/assets/:file`), answered whatever the access
 * checks say: they hold no data, and the page asks for the token the API needs. A file that is
 * not one of the page's is 404 `not_found`.
 */
export function inspectorAssetRoutes(dir = INSPECTOR_DIR): CompiledRoute[] {
  return [
    { ...compileRoute({ method: 'GET', path: '/', handler: () => {} }, 'the inspector route'), open: (res) => void sendAsset(res, 'index.html', dir) },
    {
      ...compileRoute({ method: 'GET', path: '/inspector/assets/:file', handler: () => {} }, 'the inspector route'),
      open: (res, _admission, url) => {
        const file = url.pathname.slice('/inspector/assets/'.length);
        if (!Object.hasOwn(ASSETS, file)) return replyError(res, 404, 'not_found', `the inspector has no file ${JSON.stringify(file)}`);
        void sendAsset(res, file, dir);
      },
    },
  ];
}
