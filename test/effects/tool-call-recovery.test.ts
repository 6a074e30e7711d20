import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { INTERRUPTED_BY_RESTART, checkInvariants, toolCallRecovery, type Rune } from '../../src/index.js';
import { createEngine, memoryStore } from '../../src/streams/index.js';

const settle = () => new Promise((r) => setImmediate(r));

describe('toolCallRecovery', () => {
  it('ends a call left executing by a crash with exactly one result, and nothing more on the next restart', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const crashed = createEngine({ store: kept });
    const input = { callId: 'c1', toolName: 'shell', arguments: { cmd: 'make' } };
    await crashed.spawn('call-1', 'tool-call', input);
    await crashed.dispatch('call-1', { type: 'no_approval_needed' }); // executing when the process dies
    await crashed.spawn('call-2', 'tool-call', { ...input, callId: 'c2' });
    await crashed.dispatch('call-2', { type: 'requires_approval' }); // waiting for a person: left alone
    // (no close: the process died)

    for (let restart = 0; restart < 2; restart++) {
      const engine = createEngine({ store: kept, epics: [toolCallRecovery()] });
      await settle();
      await settle();
      await engine.close();
    }

    const runes: Rune[] = [...(await store.read('call-1')), ...(await store.read('call-2'))];
    expect(runes.filter((r) => r.stream === 'call-1').map((r) => r.kind)).toEqual(['tool.call', 'no_approval_needed', 'tool.result']);
    expect(runes.find((r) => r.kind === 'tool.result')).toMatchObject({
      event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART },
      from: 'executing',
      to: 'error_result',
    });
    expect(runes.filter((r) => r.stream === 'call-2').at(-1)?.to).toBe('awaiting_approval');
    expect(checkInvariants(runes, { complete: false })).toEqual([]);
  });
});

describe('toolCallRecovery after a failure', () => {
  it('does not take a call this process is running for a crash leftover when it is retried', async () => {
    const inner = memoryStore();
    let listings = 0;
    const flaky = {
      ...inner,
      heads: (query?: Parameters<typeof inner.heads>[0]) => {
        if (++listings === 1) throw new Error('store busy');
        return inner.heads(query);
      },
      close: async () => {}, // read below, after the engine closed
    };
    const scheduler = new VirtualTimeScheduler(undefined, 60_000);
    const engine = createEngine({ store: flaky, scheduler, epics: [toolCallRecovery()] });
    const reports: string[] = [];
    engine.errors$.subscribe((r) => reports.push(r.type));
    await settle(); // the listing fails: reported, retried in a second
    await engine.spawn('call-1', 'tool-call', { callId: 'c1', toolName: 'shell', arguments: {} });
    await engine.dispatch('call-1', { type: 'no_approval_needed' }); // executing, in this process
    scheduler.flush(); // the retry: it must not list the stored calls again
    expect(listings).toBe(1);
    await engine.close(); // lets anything dispatched meanwhile land
    expect(reports).toEqual(['epic_failed']);
    expect((await inner.read('call-1')).at(-1)?.to).toBe('executing');
  });
});
