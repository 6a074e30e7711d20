import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type BuildFailure, type Plugin } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The examples of the README and of the doc comments are programs: each is bundled against the
// source (an import of 'runestream' or 'runestream/<entry>' is the file package.json's `exports`
// names, with dist/*.js read as src/*.ts) and runs as its own `node` process; its `assert`s and
// its `// Logs:` comments state what it shows. An example that stops being true fails its test.

export const root = fileURLToPath(new URL('../..', import.meta.url));

/** One ```ts block: where it is, its code, and why it does not run (`ts no-run: <reason>`). */
export interface Example {
  /** `README.md` or the source file, relative to the repository root. */
  readonly file: string;
  /** The line of the opening fence, 1-based. */
  readonly line: number;
  /** The heading above it (README) or the declaration it documents (doc comments). */
  readonly title: string;
  readonly code: string;
  /** Set by a `no-run:` fence: the reason, '' when none was given. */
  readonly noRun?: string;
}

/** Every ```ts fence of the README (a ```typescript one is a listing, not a program), with its heading. */
export function readmeExamples(): Example[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```ts([^\n]*)\n([\s\S]*?)^```/gm)].map((m) => {
    const before = readme.slice(0, m.index);
    return {
      file: 'README.md',
      line: before.split('\n').length,
      title: [...before.matchAll(/^#+ (.*)$/gm)].at(-1)?.[1] ?? 'top',
      code: m[2]!,
      ...noRunOf(m[1]!),
    };
  });
}

/** The programs of `examples/` (each `*.ts` file there is one), titled by file name. */
export function programExamples(): Example[] {
  const dir = join(root, 'examples');
  return readdirSync(dir)
    .filter((name) => name.endsWith('.ts'))
    .sort()
    .map((name) => ({ file: `examples/${name}`, line: 1, title: name, code: readFileSync(join(dir, name), 'utf8') }));
}

/**
 * Every ```ts block under a `## Example` heading or an `@example` tag of a doc comment in
 * src/**\/*.ts, titled with the declaration the comment documents.
 */
export function docExamples(): Example[] {
  return sourceFiles(join(root, 'src')).flatMap((path) => examplesOf(relative(root, path), readFileSync(path, 'utf8')));
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : []))
    .sort();
}

/** The examples of the doc comments of one source file. */
export function examplesOf(file: string, text: string): Example[] {
  const examples: Example[] = [];
  for (const comment of text.matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
    const firstLine = text.slice(0, comment.index).split('\n').length;
    const after = text.slice(comment.index + comment[0].length);
    const title =
      /^\s*(?:export\s+)?(?:(?:async|declare|default|abstract|readonly|static|public)\s+)*(?:function\*?|const|let|class|interface|type)?\s*([\w$]+)/.exec(after)?.[1] ?? '?';
    const lines = comment[1]!.split('\n').map((line) => line.replace(/^\s*\* ?/, ''));
    let inExample = false;
    // A fence outside an example, or a ```typescript listing, is read through and not kept.
    let fence: { line: number; info: string; code: string[]; kept: boolean } | undefined;
    for (const [i, line] of lines.entries()) {
      if (fence !== undefined) {
        if (!/^\s*```\s*$/.test(line)) fence.code.push(line);
        else {
          if (fence.kept) examples.push({ file, line: fence.line, title, code: `${fence.code.join('\n')}\n`, ...noRunOf(fence.info) });
          fence = undefined;
        }
        continue;
      }
      const open = /^\s*```(\w*)(.*)$/.exec(line);
      if (open !== null) fence = { line: firstLine + i, info: open[2]!, code: [], kept: inExample && open[1] === 'ts' };
      else if (/^#+\s/.test(line)) inExample = /^#+\s+Examples?\b/.test(line);
      else if (/^@\w/.test(line)) inExample = /^@example\b/.test(line);
    }
  }
  return examples;
}

function noRunOf(info: string): { noRun?: string } {
  const m = /^\s*no-run\b:?\s*(.*)$/.exec(info);
  return m === null ? {} : { noRun: m[1]!.trim() };
}

/**
 * What the `// Logs:` comments of an example say it prints, in order, or undefined when it has
 * none. A `// Logs:` comment after a statement is one line; one on a line of its own goes on
 * through the comment-only lines right after it. Whitespace does not count (an object may be
 * written on one line or several), and `...` stands for anything.
 */
export function expectedLogs(code: string): string | undefined {
  const lines = code.split('\n');
  const said: string[] = [];
  let found = false;
  for (let i = 0; i < lines.length; i++) {
    const start = /\/\/\s*Logs:(.*)$/.exec(lines[i]!);
    if (start === null) continue;
    found = true;
    said.push(start[1]!);
    if (!/^\s*\/\//.test(lines[i]!)) continue; // after a statement, it is one line
    while (i + 1 < lines.length && /^\s*\/\/(?!\s*Logs:)/.test(lines[i + 1]!)) said.push(lines[++i]!.replace(/^\s*\/\//, ''));
  }
  return found ? said.join(' ') : undefined;
}

/** Whether `output` is what `expected` (from {@link expectedLogs}) says, whitespace aside. */
export function logsMatch(output: string, expected: string): boolean {
  const squash = (text: string): string => text.replace(/\s+/g, ' ').trim();
  const pattern = squash(expected)
    .split(/\s*\.\.\.\s*/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*?');
  return new RegExp(`^${pattern}$`, 's').test(squash(output));
}

const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, { import?: string }> };

/** The source file behind a package export (`''` or `'/client'`), from package.json's `exports`. */
export function sourceOf(subpath: string): string {
  const target = packageJson.exports[`.${subpath}`]?.import;
  if (target === undefined) throw new Error(`package.json exports no "runestream${subpath}"`);
  return join(root, target.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'));
}

/** A built example: the file `node` runs, or why it could not be built. */
export type Built = { ok: true; path: string } | { ok: false; error: string };

/**
 * Bundles the examples into `outDir`, one program each (one esbuild run for all; an example that
 * does not build is reported as such and the others are built without it). `runestream` imports
 * go to the source; a relative import in a doc comment's example is read from that source file's
 * folder, for what the package does not export; other packages stay imports of node_modules.
 */
export async function buildExamples(examples: readonly Example[], outDir: string): Promise<Built[]> {
  const built: Built[] = examples.map(() => ({ ok: false, error: 'not built' }));
  const entries = new Map<string, number>();
  for (const [i, example] of examples.entries()) {
    const entry = join(outDir, `example-${i + 1}.mts`);
    writeFileSync(entry, example.code);
    // By its real path, as esbuild names importers: node_modules may be a symlink (a worktree's).
    entries.set(realpathSync(entry), i);
  }
  const toSource: Plugin = {
    name: 'runestream-source',
    setup(b) {
      b.onResolve({ filter: /^runestream(\/[\w-]+)?$/ }, (args) => ({ path: sourceOf(args.path.slice('runestream'.length)) }));
      b.onResolve({ filter: /^\.\.?\// }, (args) => {
        const i = entries.get(args.importer);
        if (i === undefined) return undefined;
        return { path: resolve(dirname(join(root, examples[i]!.file)), args.path.replace(/\.js$/, '.ts')) };
      });
    },
  };
  let pending = [...entries.keys()];
  while (pending.length > 0) {
    try {
      await build({
        entryPoints: pending,
        outdir: outDir,
        bundle: true,
        splitting: true,
        format: 'esm',
        platform: 'node',
        target: 'node20',
        absWorkingDir: root,
        packages: 'external',
        outExtension: { '.js': '.mjs' },
        plugins: [toSource],
        logLevel: 'silent',
      });
      for (const entry of pending) built[entries.get(entry)!] = { ok: true, path: entry.replace(/\.mts$/, '.mjs') };
      pending = [];
    } catch (error) {
      const failures = (error as BuildFailure).errors ?? [];
      const failed = new Set(failures.map((f) => (f.location === null ? '' : resolve(root, f.location.file))).filter((f) => entries.has(f)));
      // An error the examples do not explain (in the source itself): every example reports it.
      if (failed.size === 0) {
        const text = failures.map((f) => `${f.location?.file ?? ''}:${f.location?.line ?? ''} ${f.text}`).join('\n') || String(error);
        for (const entry of pending) built[entries.get(entry)!] = { ok: false, error: text };
        return built;
      }
      for (const f of failures) {
        const entry = f.location === null ? '' : resolve(root, f.location.file);
        const i = entries.get(entry);
        if (i !== undefined) built[i] = { ok: false, error: `line ${f.location!.line}: ${f.text}` };
      }
      pending = pending.filter((entry) => !failed.has(entry));
    }
  }
  return built;
}

/**
 * Type-checks the examples with the repository's compiler options, each as a module of its own
 * (imports resolved as {@link buildExamples} does): the errors of each, as `line:column message`.
 */
export function typecheckExamples(examples: readonly Example[], outDir: string): string[][] {
  const errors: string[][] = examples.map(() => []);
  const files = examples.map((example, i) => {
    const file = join(outDir, `typed-${i + 1}.mts`);
    const from = dirname(join(root, example.file));
    const code = example.code.replace(/(from\s+|import\()'(runestream(?:\/[\w-]+)?|\.\.?\/[^']+)'/g, (_, lead: string, specifier: string) => {
      const target = specifier.startsWith('runestream') ? sourceOf(specifier.slice('runestream'.length)) : resolve(from, specifier);
      return `${lead}'${target.replace(/\.ts$/, '.js')}'`;
    });
    writeFileSync(file, code);
    return file;
  });
  const tsconfig = join(outDir, 'tsconfig.json');
  writeFileSync(tsconfig, JSON.stringify({ extends: join(root, 'tsconfig.json'), compilerOptions: { noEmit: true, rootDir: root }, include: [], files }));
  const run = spawnSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', tsconfig, '--pretty', 'false'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  const others: string[] = [];
  let last: string[] | undefined;
  for (const line of `${run.stdout}${run.stderr}`.split('\n').filter((l) => l.trim() !== '')) {
    const m = /typed-(\d+)\.mts\((\d+),(\d+)\): (.*)$/.exec(line);
    if (m !== null) (last = errors[Number(m[1]) - 1]!).push(`${m[2]}:${m[3]} ${m[4]}`);
    else if (/^\s/.test(line) && last !== undefined)
      last.push(`${last.pop()!} ${line.trim()}`); // an error's explanation goes on, indented
    else (last = others).push(line);
  }
  // An error outside the examples (or tsc failing to run): every example reports it.
  if (others.length > 0 || (run.status !== 0 && errors.every((e) => e.length === 0))) {
    for (const e of errors) e.push(`tsc: ${others.join('\n') || run.error?.message || `exit ${run.status}`}`);
  }
  return errors;
}

/** A temporary folder inside the checkout, so the built examples resolve rxjs and zod from its node_modules. */
export function examplesDir(prefix: string): string {
  const cache = join(root, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  return mkdtempSync(join(cache, prefix));
}

/** Runs a built example as its own process on this Node; what it printed, and how it ended. */
export function runExample(path: string): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [path], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/**
 * The tests of a set of examples: each builds, type-checks, exits 0 and prints what its
 * `// Logs:` say. One marked `no-run: <reason>` is not run (a test file, say): a test checks it
 * says why, and lists it, so the count of examples not run is in the output, not a skipped test.
 */
export function describeExamples(name: string, examples: readonly Example[]): void {
  describe(`${name}`, () => {
    const dir = examplesDir('examples-');
    const runnable = examples.filter((e) => e.noRun === undefined);
    let built: Built[] = [];
    let typeErrors: string[][] = [];
    beforeAll(async () => {
      built = await buildExamples(runnable, dir);
      typeErrors = typecheckExamples(runnable, dir);
    }, 240_000);
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it('has examples', () => {
      expect(examples.length).toBeGreaterThan(0);
    });

    for (const example of examples.filter((e) => e.noRun !== undefined)) {
      const where = `${example.file}:${example.line}`;
      it(`${where} (${example.title}) is not run, and says why: ${example.noRun || '(no reason given)'}`, () => {
        expect(example.noRun, `${where}: a no-run example says why: \`\`\`ts no-run: <reason>`).not.toBe('');
      });
    }

    for (const example of runnable) {
      const where = `${example.file}:${example.line}`;
      it(`${where} (${example.title}) runs`, () => {
        const result = built[runnable.indexOf(example)]!;
        if (!result.ok) return expect.fail(`${where} does not build: ${result.error}`);
        expect(typeErrors[runnable.indexOf(example)], `${where} does not type-check`).toEqual([]);
        const run = runExample(result.path);
        expect(run.status, `${where} exited with ${run.status}:\n${run.stderr}`).toBe(0);
        const logs = expectedLogs(example.code);
        if (logs !== undefined) expect(logsMatch(run.stdout, logs), `${where} printed:\n${run.stdout}\nbut its // Logs: say:\n${logs}`).toBe(true);
      });
    }
  });
}
