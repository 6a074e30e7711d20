import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const packageJson = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { exports: Record<string, string | { types: string; import: string }> };

/** Each package entry (`runestream`, `runestream/sqlite`, ...) with the source file its dist file is built from. */
const entries = Object.entries(packageJson.exports)
  .filter(([subpath]) => subpath !== './package.json')
  .map(([subpath, target]) => {
    const { types, import: js } = target as { types: string; import: string };
    return { name: `runestream${subpath.slice(1)}`, types, js, source: js.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts') };
  });

const namesOf = async (source: string): Promise<string[]> => Object.keys((await import(`${root}${source}`)) as object);

describe('package entries', () => {
  it('are the root, sqlite, agents, server, client, store-kit, s3 and postgres, each built from its file under src', () => {
    expect(entries.map((e) => [e.name, e.source])).toEqual([
      ['runestream', 'src/index.ts'],
      ['runestream/sqlite', 'src/sqlite.ts'],
      ['runestream/agents', 'src/agents.ts'],
      ['runestream/server', 'src/server/index.ts'],
      ['runestream/client', 'src/server/client/index.ts'],
      ['runestream/store-kit', 'src/store-kit.ts'],
      ['runestream/s3', 'src/s3.ts'],
      ['runestream/postgres', 'src/postgres.ts'],
    ]);
    for (const entry of entries) {
      expect(existsSync(`${root}${entry.source}`), entry.source).toBe(true);
      expect(entry.types).toBe(entry.js.replace(/\.js$/, '.d.ts'));
    }
  });

  it("each export a name from one entry only (the store errors are also the store kit's)", async () => {
    const homes = new Map<string, string[]>();
    for (const entry of entries) for (const name of await namesOf(entry.source)) homes.set(name, [...(homes.get(name) ?? []), entry.name]);
    const shared = [...homes].filter(([, where]) => where.length > 1);
    expect(shared).toEqual([
      ['StoreConflictError', ['runestream', 'runestream/store-kit']],
      ['StoreError', ['runestream', 'runestream/store-kit']],
      ['StoreFencedError', ['runestream', 'runestream/store-kit']],
    ]);
  });

  it("leave internals out: the stores' shared checks are the store kit's, the engine's plumbing is no one's", async () => {
    const internals = [
      'checkBatch',
      'headMatches',
      'openState',
      'prunePastSnapshot',
      'isStorableText',
      'valueCheck',
      'KeyedListeners',
      'replayThenLive',
      'runEpics',
      'epicName',
      'registerSubmit',
      'describeIssues',
      'expandRows',
    ];
    const exported = new Map<string, string[]>();
    for (const entry of entries)
      exported.set(
        entry.name,
        (await namesOf(entry.source)).filter((name) => internals.includes(name)),
      );
    expect(Object.fromEntries(exported)).toEqual({
      runestream: [],
      'runestream/sqlite': [],
      'runestream/agents': [],
      'runestream/server': [],
      'runestream/client': [],
      'runestream/store-kit': ['checkBatch', 'headMatches', 'openState', 'prunePastSnapshot'],
      'runestream/s3': [],
      'runestream/postgres': [],
    });
  });
});
