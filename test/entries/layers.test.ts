import { readFileSync, readdirSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The layers, lowest first. A file may import its own layer and the layers below it, never one
 * above: server -> effects -> streams -> reducers. The entries (src/*.ts) and the command line
 * (src/cli) sit on top. The browser-safe client (src/server/client) has its own, stricter test:
 * test/client/browser-safe.test.ts.
 */
const LAYERS = ['reducers', 'streams', 'effects', 'server', 'entries', 'cli'] as const;
type Layer = (typeof LAYERS)[number];

/** The layer of a path relative to the checkout (posix separators), or undefined outside src. */
function layerOf(path: string): Layer | undefined {
  const [top, second] = path.split('/');
  if (top !== 'src' || second === undefined) return undefined;
  if (!path.slice('src/'.length).includes('/')) return 'entries';
  return (LAYERS as readonly string[]).includes(second) ? (second as Layer) : undefined;
}

/** The packages a reducer may use: a reducer is pure, so no rxjs, no I/O, no Node module. */
const REDUCER_PACKAGES = new Set(['zod']);

/** Every module a source imports or re-exports, statically or dynamically, `import type` included. */
const importsOf = (source: string): string[] =>
  [...source.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'|^\s*import\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/gm)].map((m) => (m[1] ?? m[2] ?? m[3])!);

/** What is wrong with these files' imports: one line per import that points the wrong way. */
function layerViolations(files: ReadonlyMap<string, string>): string[] {
  const wrong: string[] = [];
  for (const [file, source] of files) {
    const from = layerOf(file);
    if (from === undefined) continue;
    for (const specifier of importsOf(source)) {
      if (!specifier.startsWith('.')) {
        const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;
        if (from === 'reducers' && !REDUCER_PACKAGES.has(name)) wrong.push(`${file} imports ${specifier}: a reducer imports only zod`);
        continue;
      }
      const target = posix.normalize(posix.join(posix.dirname(file), specifier));
      const to = layerOf(target);
      if (to === undefined) wrong.push(`${file} imports ${specifier}, outside src`);
      else if (LAYERS.indexOf(to) > LAYERS.indexOf(from)) wrong.push(`${file} imports ${specifier}: ${from} may not import ${to}`);
    }
  }
  return wrong;
}

/** Every .ts file under src, by its path relative to the checkout. */
function sourceFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) files.set(relative(root, path).split(sep).join('/'), readFileSync(path, 'utf8'));
    }
  };
  walk(join(root, 'src'));
  return files;
}

describe('layers', () => {
  it('point one way in src: server -> effects -> streams -> reducers, and a reducer imports only zod', () => {
    const files = sourceFiles();
    expect(files.size).toBeGreaterThan(100); // it did read the tree
    expect([...files.keys()].filter((file) => layerOf(file) === undefined)).toEqual([]); // every file is in a layer
    expect(layerViolations(files)).toEqual([]);
  });

  // The check itself, on files made up to break each rule.
  it.each([
    ['src/reducers/x/machine.ts imports rxjs: a reducer imports only zod', 'src/reducers/x/machine.ts', "import { map } from 'rxjs';"],
    ['src/reducers/x.ts imports node:fs: a reducer imports only zod', 'src/reducers/x.ts', "import { readFileSync } from 'node:fs';"],
    ['src/reducers/x.ts imports ../streams/engine.js: reducers may not import streams', 'src/reducers/x.ts', "import type { Engine } from '../streams/engine.js';"],
    [
      'src/streams/x.ts imports ../effects/tools/tool-call-effects.js: streams may not import effects',
      'src/streams/x.ts',
      "export { toolCallEffects } from '../effects/tools/tool-call-effects.js';",
    ],
    ['src/streams/x.ts imports ../server/server.js: streams may not import server', 'src/streams/x.ts', "import {\n  createServer,\n} from '../server/server.js';"],
    ['src/effects/llm/x.ts imports ../../server/server.js: effects may not import server', 'src/effects/llm/x.ts', "const s = await import('../../server/server.js');"],
    ['src/server/x.ts imports ../cli/main.js: server may not import cli', 'src/server/x.ts', "import { main } from '../cli/main.js';"],
    ['src/streams/x.ts imports ../index.js: streams may not import entries', 'src/streams/x.ts', "import { createEngine } from '../index.js';"],
    ['src/streams/x.ts imports ../../test/support/x.js, outside src', 'src/streams/x.ts', "import '../../test/support/x.js';"],
  ])('finds %s', (expected, file, source) => {
    expect(layerViolations(new Map([[file, source]]))).toEqual([expected]);
  });

  it('lets each layer import its own and the ones below, and leaves comments alone', () => {
    const fine = new Map([
      ['src/reducers/x/machine.ts', "import { z } from 'zod';\nimport type { Machine } from '../machine.js';\n/**\n * import { map } from 'rxjs';\n */"],
      ['src/streams/x.ts', "import { map } from 'rxjs';\nimport { chatActor } from '../reducers/chat-actor/machine.js';"],
      ['src/effects/x.ts', "import { createEngine } from '../streams/engine.js';\nimport type { Rune } from '../reducers/rune.js';"],
      ['src/server/x.ts', "import { WebSocket } from 'ws';\nimport { toolCallEffects } from '../effects/tools/tool-call-effects.js';"],
      ['src/agents.ts', "export { agentEpics } from './effects/agent/agent-epics.js';"],
      ['src/cli/main.ts', "import { createServer } from '../server/server.js';\nimport { sqliteStore } from '../sqlite.js';"],
    ]);
    expect(layerViolations(fine)).toEqual([]);
  });
});
