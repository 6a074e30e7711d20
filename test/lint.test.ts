import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const oxlint = join(root, 'node_modules', '.bin', 'oxlint');
const dir = mkdtempSync(join(tmpdir(), 'runestream-lint-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Finding {
  code: string;
  severity: string;
  labels: { span: { line: number } }[];
}

/** Runs `npm run lint`'s linter, with the repository's configuration, on one file of `source`. */
function lint(source: string): { status: number | null; findings: { rule: string; line: number; severity: string }[] } {
  const file = join(dir, `case-${Math.random().toString(36).slice(2)}.ts`);
  writeFileSync(file, source);
  const run = spawnSync(oxlint, ['-c', join(root, '.oxlintrc.json'), '-f', 'json', file], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  const report = JSON.parse(run.stdout) as { diagnostics: Finding[] };
  return {
    status: run.status,
    findings: report.diagnostics.map((d) => ({ rule: d.code, line: d.labels[0]!.span.line, severity: d.severity })),
  };
}

// typescript-eslint needs the TypeScript 5/6 compiler API, gone in TypeScript 7; these cases show
// that the type-aware rules of this repository's linter really run.
describe('the linter (npm run lint)', () => {
  it('fails on a promise that is dropped, and on an async callback where a void one is expected', () => {
    const { status, findings } = lint(
      [
        'export async function save(): Promise<void> {}',
        'export function onSubmit(): void {',
        '  save();',
        '  Promise.resolve();',
        '  [1, 2].forEach(async () => {',
        '    await save();',
        '  });',
        '}',
        '',
      ].join('\n'),
    );
    expect(findings).toEqual([
      { rule: 'typescript(no-floating-promises)', line: 3, severity: 'error' },
      { rule: 'typescript(no-floating-promises)', line: 4, severity: 'error' },
      { rule: 'typescript(no-misused-promises)', line: 5, severity: 'error' },
    ]);
    expect(status).toBe(1);
  });

  it('passes a promise that is awaited, handled, or dropped with void', () => {
    const { status, findings } = lint(
      [
        'export async function save(): Promise<void> {}',
        'export async function onSubmit(): Promise<void> {',
        '  await save();',
        '  save().catch(() => undefined);',
        '  void save(); // nothing is lost: save cannot reject',
        '}',
        '',
      ].join('\n'),
    );
    expect(findings).toEqual([]);
    expect(status).toBe(0);
  });
});
