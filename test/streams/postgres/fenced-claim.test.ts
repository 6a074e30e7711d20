import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, StoreFencedError, type Engine, type Fence } from '../../../src/index.js';
import { postgresStore } from '../../../src/postgres.js';
import { POSTGRES_URL, dropSchemas, randomSchema } from '../../support/postgres.js';

const schemas: string[] = [];
afterAll(() => dropSchemas(schemas));

const CALL = 'conv/c1/agent/a/call/c1';
const input = { callId: 'c1', toolName: 'lookup', arguments: {} };

describe('a tool claim on PostgreSQL under fencing', () => {
  it("an old owner's claim, made after a new owner raised the shard's epoch, is refused by the store; the new owner's claim is the call's", async () => {
    const schema = randomSchema();
    schemas.push(schema);
    const engines: Engine[] = [];
    try {
      // Two writers on one schema, each fencing the call's stream with the epoch it holds.
      const open = async (fence: Fence) => {
        const store = await postgresStore({ connectionString: POSTGRES_URL, schema });
        const engine = createEngine({ store, followStore: true, fence: () => fence });
        engines.push(engine);
        return { store, engine };
      };
      const old = await open({ lease: 'shard-7', epoch: 1 });
      const next = await open({ lease: 'shard-7', epoch: 2 });
      expect((await old.engine.spawn(CALL, 'tool-call', input)).accepted).toBe(true);
      expect((await old.engine.dispatch(CALL, { type: 'no_approval_needed' })).accepted).toBe(true);

      await next.store.raiseFence({ lease: 'shard-7', epoch: 2 }); // the new owner took the shard
      const late = await old.engine.dispatch(CALL, { type: 'execution_claimed', claim: 'old-owner' }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(late).toBeInstanceOf(StoreFencedError);
      expect(late).toMatchObject({ code: 'fenced', fence: { lease: 'shard-7', epoch: 1 }, newestEpoch: 2 });

      const claimed = await next.engine.dispatch(CALL, { type: 'execution_claimed', claim: 'new-owner' });
      expect(claimed).toMatchObject({ accepted: true, rune: { seq: 3, kind: 'tool.claimed' } });
      const runes = await next.store.read(CALL);
      expect(runes.map((rune) => rune.kind)).toEqual(['tool.call', 'no_approval_needed', 'tool.claimed']);
      expect(runes[2]!.event).toMatchObject({ claim: 'new-owner' });
    } finally {
      await Promise.all(engines.map((engine) => engine.close()));
    }
  });
});
