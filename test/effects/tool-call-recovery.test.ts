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
