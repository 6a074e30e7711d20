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
    // The page runs its own script and talks to its own origin only.
    'content-security-policy': "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self'; script-src 'self'",
    'x-content-type-options': 'nosniff',
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
