import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** What the light entries must never load, not even through another package. */
const HEAVY = /^(ai|@ai-sdk\/.*|@modelcontextprotocol\/sdk|better-sqlite3|pg|ws)$/;

/**
 * The packages a fresh node process loads when it imports `entry` (a source file; tsx compiles
 * it), as import-probe.mjs records them: every module resolved, and every CommonJS one required.
 */
async function packagesLoadedBy(entry: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/support/import-probe.mjs', '--count', entry], { cwd: root });
  const { modules } = JSON.parse(stdout) as { modules: string[] };
  expect(modules.some((url) => url.endsWith(`/${entry}`))).toBe(true); // it did record the entry's own graph
  const packages = new Set<string>();
  for (const url of modules) {
    const name = [...url.matchAll(/\/node_modules\/((?:@[^/]+\/)?[^/]+)\//g)].at(-1)?.[1];
    if (name !== undefined) packages.add(name);
  }
  return [...packages].sort();
}

describe('entry weight', () => {
  it.each(['src/index.ts', 'src/server/client/index.ts', 'src/store-kit.ts'])(
    '%s loads no LLM SDK, MCP SDK, SQLite binding, PostgreSQL client or WebSocket server',
    async (entry) => {
      const packages = await packagesLoadedBy(entry);
      expect(packages.filter((name) => HEAVY.test(name))).toEqual([]);
    },
    60_000,
  );

  it('src/s3.ts loads the S3 SDK only when its store is first used, not on import', async () => {
    expect((await packagesLoadedBy('src/s3.ts')).filter((name) => name.startsWith('@aws-sdk/'))).toEqual([]);
  }, 60_000);

  // The probe itself: where those packages are loaded, it sees them.
  it.each([
    ['src/server/index.ts', ['ws']],
    ['src/sqlite.ts', ['better-sqlite3']],
    ['src/postgres.ts', ['pg']],
    ['src/agents.ts', ['@ai-sdk/provider', '@modelcontextprotocol/sdk', 'ai']],
  ])(
    'sees %s load %j',
    async (entry, heavy) => {
      const packages = await packagesLoadedBy(entry);
      expect(packages).toEqual(expect.arrayContaining(heavy));
    },
    60_000,
  );
});
