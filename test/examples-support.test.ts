import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { examplesDir, examplesOf, expectedLogs, logsMatch, typecheckExamples } from './support/examples.js';

// The rules test/doc-examples.test.ts and test/readme.test.ts run by: which blocks are examples,
// and what their `// Logs:` comments promise.
describe('doc comment examples: which blocks run', () => {
  const source = [
    '/**',
    ' * Adds.',
    ' *',
    ' * ```ts',
    ' * notAnExample();',
    ' * ```',
    ' *',
    ' * ## Example',
    ' * ```ts',
    " * import { add } from 'runestream';",
    ' * console.log(add(1, 2)); // Logs: 3',
    ' * ```',
    ' * ```typescript',
    ' * aListing();',
    ' * ```',
    ' *',
    ' * ## See also',
    ' * ```ts',
    ' * notAnExampleEither();',
    ' * ```',
    ' */',
    'export function add(a: number, b: number): number {',
    '  return a + b;',
    '}',
    '',
    '/**',
    ' * @example',
    ' * ```ts no-run: needs a live provider',
    ' * await callTheProvider();',
    ' * ```',
    ' * @see add',
    ' */',
    'export const call = async (): Promise<void> => undefined;',
  ].join('\n');

  it('keeps the ```ts blocks under ## Example or @example, titled by their declaration', () => {
    expect(examplesOf('src/add.ts', source)).toEqual([
      { file: 'src/add.ts', line: 9, title: 'add', code: "import { add } from 'runestream';\nconsole.log(add(1, 2)); // Logs: 3\n" },
      { file: 'src/add.ts', line: 28, title: 'call', code: 'await callTheProvider();\n', noRun: 'needs a live provider' },
    ]);
  });
});

describe('// Logs: comments', () => {
  it('joins every Logs comment in order; one on its own line goes on through the comment lines after it', () => {
    const code = [
      'console.log(1); // Logs: 1',
      '// not part of the line above',
      'console.log({ a: 1 }, [2]);',
      '// Logs:',
      '// { a: 1 }',
      '// [ 2 ]',
      'done();',
      '// a remark after the code',
    ].join('\n');
    expect(expectedLogs(code)?.replace(/\s+/g, ' ').trim()).toBe('1 { a: 1 } [ 2 ]');
    expect(expectedLogs('console.log(1);')).toBeUndefined();
  });

  it('matches whatever the whitespace, with ... for anything', () => {
    expect(logsMatch('{\n  a: 1,\n  b: { c: 2 }\n}\n', '{ a: 1, b: { c: 2 } }')).toBe(true);
    expect(logsMatch('ws://127.0.0.1:54321\n', 'ws://127.0.0.1:...')).toBe(true);
    expect(logsMatch('{ accepted: false, state: { value: "x" }, code: "no" }', '{ accepted: false, state: ..., code: "no" }')).toBe(true);
    expect(logsMatch('1\n2\n', '1')).toBe(false);
    expect(logsMatch('1.5', '1x5')).toBe(false);
  });
});

describe('the type check of examples', () => {
  const dir = examplesDir('typecheck-');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reports the errors of each example, with imports of runestream read from the source', () => {
    const errors = typecheckExamples(
      [
        { file: 'src/index.ts', line: 1, title: 'good', code: "import { chatActor } from 'runestream';\nconst value: string = chatActor.initial().value;\n" },
        { file: 'src/index.ts', line: 1, title: 'bad', code: "import { chatActor } from 'runestream';\nconst value: number = chatActor.initial().value;\n" },
      ],
      dir,
    );
    expect(errors[0]).toEqual([]);
    expect(errors[1]).toEqual([expect.stringMatching(/^2:7 error TS2322: Type '.*' is not assignable to type 'number'/)]);
  });
});
