import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as tick } from 'node:timers/promises';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../../src/agents.js';
import { agentStreams } from '../../../src/index.js';
import { checkInvariants, createEngine, type TurnEngineState } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { storeLog } from '../../support/store-log.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-tool-order-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** How many event-loop turns a run may wait for its peers before it gives up on overlapping. */
const PATIENCE = 200;

describe('a tool round of an agent on a SQLite file: unsafe calls one at a time in call order, safe ones side by side', () => {
  it('runs writes one at a time in the order the model asked, reads beside them and each other; the log keeps every invariant', async () => {
    const events: string[] = [];
    let writing = 0;
    let mostWriting = 0;
    const reading = new Set<string>();
    let mostReading = 0;
    const write = defineTool({
      name: 'write',
      description: 'Writes a line.',
      inputSchema: z.object({ id: z.string() }),
      execute: async ({ id }) => {
        events.push(`start ${id}`);
        mostWriting = Math.max(mostWriting, ++writing);
        for (let i = 0; i < 20; i++) await tick(); // long enough for a second write to start, were it allowed to
        writing--;
        events.push(`end ${id}`);
        return id;
      },
    });
    const read = defineTool({
      name: 'read',
      description: 'Reads a line.',
      inputSchema: z.object({ id: z.string() }),
      parallelSafe: true,
      execute: async ({ id }) => {
        reading.add(id);
        mostReading = Math.max(mostReading, reading.size);
        // Waits for the other read to start: it ends alone only if reads were run one at a time.
        for (let i = 0; i < PATIENCE && mostReading < 2; i++) await tick();
        reading.delete(id);
        return id;
      },
    });
    const calls = ['w1', 'r1', 'w2', 'r2', 'w3'].map((id) => ({ toolName: id.startsWith('w') ? 'write' : 'read', input: { id }, toolCallId: id }));
    const model = scriptedModel([{ text: 'On it.', toolCalls: calls }, { text: 'Done.' }]);
    const store = sqliteStore(join(dir, 'order.db'));
    const engine = createEngine({ store, epics: agentEpics({ model, tools: [write, read] }) });
    try {
      const a = agentStreams('conv/c1', 'a1');
      await engine.spawn(a.turn, 'turn-engine');
      const done = firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
      await engine.dispatch(a.turn, { type: 'start_turn', input: 'write three, read two' });
      const turn = await done;
      expect(turn.output).toBe('On it.Done.');
      // Each model call's text apart, in the state and in turn.completed (issue 28 j).
      expect(turn.messages).toEqual(['On it.', 'Done.']);

      expect(events).toEqual(['start w1', 'end w1', 'start w2', 'end w2', 'start w3', 'end w3']);
      expect(mostWriting).toBe(1);
      expect(mostReading).toBe(2);
      const log = await storeLog(store);
      expect(log.filter((r) => r.kind === 'tool.result').map((r) => r.event.type)).toEqual(['success', 'success', 'success', 'success', 'success']);
      expect(log.find((r) => r.kind === 'turn.completed')?.payload).toMatchObject({ finalOutput: 'On it.Done.', messages: ['On it.', 'Done.'] });
      expect(checkInvariants(log)).toEqual([]);
    } finally {
      await engine.close();
    }
  });
});
