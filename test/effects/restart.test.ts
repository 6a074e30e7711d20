import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEngine, type Epic, type RuneStore } from '../../src/index.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { chatActorLifecycle } from '../../src/effects/chat-actor-lifecycle.js';
import { providerBreakers } from '../../src/effects/llm/provider-breakers.js';
import { defineTool } from '../../src/effects/tools/tool.js';
import { toolCallEffects } from '../../src/effects/tools/tool-call-effects.js';

/**
 * A restart with effects pending for streams of three machines (a chat actor's inactivity clock, a
 * tool call left executing, a breaker left OPEN), resumed by the engine's effect host alone: none
 * of these epics lists the store or keeps a flag of its own.
 */

const dir = mkdtempSync(join(tmpdir(), 'runestream-restart-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hang = defineTool({ name: 'hang', description: 'Runs until stopped.', inputSchema: z.object({}), execute: () => new Promise<never>(() => {}) });
const epics = (): Epic[] => [chatActorLifecycle(), toolCallEffects({ tools: [hang] }), providerBreakers()];
const IDLE_ACTORS = 200;

/** Counts the reads hydration makes, per stream: what starting an engine cost. */
function countingHydrations(store: RuneStore): { store: RuneStore; hydrated: Set<string> } {
  const hydrated = new Set<string>();
  return {
    hydrated,
    store: {
      ...store,
      append: (runes) => store.append(runes),
      head: (stream) => store.head(stream),
      heads: (query) => store.heads(query),
      read: (stream, afterSeq, limit) => store.read(stream, afterSeq, limit),
      latestSnapshot: (stream) => {
        hydrated.add(stream);
        return store.latestSnapshot(stream);
      },
      readEvents: (stream, afterSeq, limit) => store.readEvents(stream, afterSeq, limit),
      saveSnapshot: (snapshot) => store.saveSnapshot(snapshot),
      prune: (stream, throughSeq) => store.prune(stream, throughSeq),
      close: () => store.close(),
    },
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('a restart with effects pending on three machines', () => {
  it('resumes each from the stored heads: the executing call ends, the OPEN breaker half-opens, the idle actors time out at their deadlines; nothing idle is hydrated at start', async () => {
    const file = join(dir, 'restart.db');
    const before = createEngine({ store: sqliteStore(file), scheduler: new VirtualTimeScheduler(), epics: epics() });
    for (let i = 0; i < IDLE_ACTORS; i++) await before.spawn(`chat-${i}`, 'chat-actor'); // idle at 0: deadline 600,000
    await before.spawn('call-1', 'tool-call', { callId: 'c1', toolName: 'hang', arguments: {} }); // executing, hangs
    await before.spawn('provider/p', 'circuit-breaker', { failureThreshold: 1, successThreshold: 1, openTimeoutMs: 30_000 });
    await before.dispatch('provider/p', { type: 'failure', error: 'down' }); // OPEN at 0: half-opens at 30,000
    for (let i = 0; i < 5 && (await before.snapshot<{ value: string }>('call-1'))?.state.value !== 'executing'; i++) await settle();
    expect((await before.snapshot<{ value: string }>('call-1'))?.state.value).toBe('executing');
    await before.close(); // the process stops: the call's run, the breaker's clock and every actor's clock die with it

    // Virtual time runs to the actors' deadline (the last rune a timed-out actor's clock reads is
    // read from the file in real time, after the flush: its rune is stamped with the time then).
    const scheduler = new VirtualTimeScheduler(undefined, 600_000);
    scheduler.frame = 60_000; // back a minute later
    const { store, hydrated } = countingHydrations(sqliteStore(file));
    const after = createEngine({ store, scheduler, epics: epics() });
    const appended: string[] = [];
    after.runes$().subscribe((rune) => appended.push(`${rune.stream} ${rune.kind} ${rune.to}@${rune.at}`));
    for (let i = 0; i < 5; i++) await settle(); // the host lists the heads and arms what they need
    // Only what had to act at once was hydrated: the call (to end it) and the breaker (its clock).
    expect([...hydrated].sort()).toEqual(['call-1', 'provider/p']);
    scheduler.flush(); // to the actors' deadline
    for (let i = 0; i < 5; i++) await settle();

    expect(appended).toContain('call-1 tool.result error_result@60000');
    expect(appended).toContain('provider/p open_timeout_elapsed HALF_OPEN@60000');
    const timeouts = appended.filter((line) => line.includes('InactivityTimeout'));
    expect(timeouts).toHaveLength(IDLE_ACTORS);
    expect(timeouts.filter((line) => !line.endsWith('completed@600000'))).toEqual([]);
    expect((await after.snapshot<{ error?: string }>('call-1'))?.state.error).toBe('interrupted by restart');
    await after.close();
  });
});
