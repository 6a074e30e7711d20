// A tiny server for a browser page that uses runestream/client: it bundles page.ts for the
// browser, serves it with index.html from runestream's own HTTP server (so the page's WebSocket
// is same-origin), and hosts an agent that echoes what it is told (a scripted model: no network).
//
//   cd examples/browser && npx tsx serve.ts      # then open the URL it prints
//
// (In this checkout, tsconfig.json here maps the runestream entries to the source, so no build is
// needed; in your own application they come from node_modules.)
//
// PORT picks the port (7071 by default; 0 for any free one).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { agentStreams, createEngine } from 'runestream';
import { agentEpics, scriptedModel } from 'runestream/agents';
import { createServer } from 'runestream/server';

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));

/** An offline model that answers with what it was last told. */
const echo = scriptedModel(
  [
    (call) => {
      const last = call.prompt.at(-1);
      const said = Array.isArray(last?.content) ? last.content.map((part) => (part.type === 'text' ? part.text : '')).join('') : '';
      return { text: `You said: ${said}` };
    },
  ],
  { whenExhausted: 'cycle' },
);

// The page's code, bundled once at start: runestream/client and rxjs in one file.
const bundle = await build({ entryPoints: [here('page.ts')], bundle: true, minify: true, format: 'esm', platform: 'browser', write: false, logLevel: 'silent' });
const pageJs = bundle.outputFiles[0]!.text;
const html = readFileSync(here('index.html'), 'utf8');

const engine = createEngine({ epics: agentEpics({ model: echo, tools: [] }) });
await engine.spawn(agentStreams('conv/web', 'echo').turn, 'turn-engine');
const server = await createServer({
  engine,
  port: Number(process.env.PORT ?? 7071),
  routes: [
    { method: 'GET', path: '/', handler: (_req, res) => void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html) },
    { method: 'GET', path: '/page.js', handler: (_req, res) => void res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(pageJs) },
  ],
});
console.log(`open ${server.httpUrl}/`);

// Ctrl-C (or a test's SIGTERM): close the server, then the engine.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void server
      .close()
      .then(() => engine.close())
      .then(() => process.exit(0));
  });
}
