// `node [--import tsx] import-probe.mjs [--count] <file>...`: imports the files in a fresh process
// and prints `{"ms": <time the imports took>, "modules": [<file URL of every module loaded>]}`.
// With --count, a resolve hook records each module the imports load (ESM), and the CommonJS
// cache adds what was required; without it nothing is recorded (hooks slow the imports down,
// so timing runs go without) and `modules` is empty. Plain JavaScript, so the import-cost
// benchmark can run it on the built package with nothing but node.
import { createRequire, register } from 'node:module';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { MessageChannel } from 'node:worker_threads';

const args = process.argv.slice(2);
const count = args[0] === '--count';
const files = count ? args.slice(1) : args;

const MARKER = 'import-probe:flushed';
const resolved = new Set();
let flushed = Promise.resolve();
let port;
if (count) {
  const channel = new MessageChannel();
  port = channel.port1;
  flushed = new Promise((done) => port.on('message', (url) => (url === MARKER ? done() : resolved.add(url))));
  register('./import-probe-hooks.mjs', { parentURL: import.meta.url, data: { port: channel.port2, marker: MARKER }, transferList: [channel.port2] });
}

const start = performance.now();
for (const file of files) await import(pathToFileURL(resolve(file)).href);
const ms = performance.now() - start;

let modules = [];
if (count) {
  import.meta.resolve(MARKER);
  await flushed;
  port.close();
  const required = Object.keys(createRequire(import.meta.url).cache).map((path) => pathToFileURL(path).href);
  modules = [...new Set([...resolved, ...required])].filter((url) => url.startsWith('file:')).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
process.stdout.write(JSON.stringify({ ms, modules }));
