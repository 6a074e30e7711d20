import { VirtualTimeScheduler, filter, firstValueFrom } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { INTERRUPTED_BY_RESTART, checkInvariants, toolCallRecovery, type Rune, type StreamHead, type ToolCallState } from '../../src/index.js';
import { createEngine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { epicContext } from '../support/epic-context.js';

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
  it('tries a failed listing again: the crash leftover is ended, a call this process runs is not', async () => {
    const inner = memoryStore();
    const leftover = createEngine({ store: { ...inner, close: async () => {} } });
    await leftover.spawn('call-0', 'tool-call', { callId: 'c0', toolName: 'shell', arguments: {} });
    await leftover.dispatch('call-0', { type: 'no_approval_needed' }); // executing when that process died
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
    await settle(); // the listing fails: tried again in a second
    await engine.spawn('call-1', 'tool-call', { callId: 'c1', toolName: 'shell', arguments: {} });
    await engine.dispatch('call-1', { type: 'no_approval_needed' }); // executing, in this process
    scheduler.flush(); // the second listing
    await settle();
    await settle();
    expect(listings).toBe(2);
    await engine.close(); // lets anything dispatched meanwhile land
    expect(reports).toEqual([]);
    expect((await inner.read('call-0')).at(-1)).toMatchObject({ to: 'error_result', event: { error: INTERRUPTED_BY_RESTART } });
    expect((await inner.read('call-1')).at(-1)?.to).toBe('executing');
  });

  it('leaves alone a call approved while the stored calls are listed, and ends one whose progress shows it executing from before', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, cold, expectObservable }) => {
      const toolRune = (stream: string, seq: number, kind: string, from: string, to: string): Rune => ({
        stream,
        seq,
        machine: 'tool-call',
        kind,
        event: { type: kind },
        from,
        to,
        at: 0,
      });
      // A slow listing (5 ms). Meanwhile call-1 is approved here (so the listing finds it executing),
      // and call-2, executing since before the restart, reports progress.
      const runes = hot<Rune>('-a-b', {
        a: toolRune('call-1', 3, 'tool.approved', 'awaiting_approval', 'executing'),
        b: toolRune('call-2', 3, 'progress_update', 'executing', 'executing'),
      });
      const head = (stream: string): StreamHead => ({ stream, machine: 'tool-call', seq: 3, value: 'executing', at: 0 });
      const heads = cold<StreamHead>('-----(xyz|)', { x: head('call-1'), y: head('call-2'), z: head('call-3') });
      const commands = toolCallRecovery()(runes, epicContext(scheduler, { streams: () => heads }), undefined);
      const interrupted = (stream: string) => ({ stream, event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART } });
      expectObservable(commands).toBe('---b-z', { b: interrupted('call-2'), z: interrupted('call-3') });
    });
  });
});

describe('toolCallRecovery with rerun', () => {
  it('leaves alone the calls something runs again, and interrupts the rest', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const crashed = createEngine({ store: kept });
    await crashed.spawn('call-1', 'tool-call', { callId: 'c1', toolName: 'lookup', arguments: { word: 'rune' } });
    await crashed.dispatch('call-1', { type: 'no_approval_needed' });
    await crashed.spawn('call-2', 'tool-call', { callId: 'c2', toolName: 'shell', arguments: { cmd: 'make' } });
    await crashed.dispatch('call-2', { type: 'no_approval_needed' });
    await crashed.spawn('call-3', 'tool-call', { callId: 'c3', toolName: 'flaky', arguments: {} });
    await crashed.dispatch('call-3', { type: 'no_approval_needed' });

    const asked: string[] = [];
    const rerun = (call: { toolName: string }) => {
      asked.push(call.toolName);
      if (call.toolName === 'flaky') throw new Error('cannot tell'); // cannot vouch for it: interrupted
      return call.toolName === 'lookup';
    };
    const engine = createEngine({ store: kept, epics: [toolCallRecovery({ rerun })] });
    const interrupted = await Promise.all(['call-2', 'call-3'].map((s) => firstValueFrom(engine.runes$(s).pipe(filter((r) => r.kind === 'tool.result')))));
    await engine.close();

    expect(interrupted.map((r) => r.event)).toEqual([
      { type: 'execution_error', error: INTERRUPTED_BY_RESTART },
      { type: 'execution_error', error: INTERRUPTED_BY_RESTART },
    ]);
    expect((await store.read('call-1')).at(-1)?.to).toBe('executing'); // for the re-run
    expect(asked.sort()).toEqual(['flaky', 'lookup', 'shell']);
  });

  it("does not interrupt a re-run whose progress it hears while listing; does interrupt another call's", () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, cold, expectObservable }) => {
      const progress = (stream: string): Rune => ({
        stream,
        seq: 3,
        machine: 'tool-call',
        kind: 'tool.progress',
        event: { type: 'progress_update', chunk: '.' },
        from: 'executing',
        to: 'executing',
        at: 0,
      });
      const runes = hot<Rune>('-a-b', { a: progress('call-1'), b: progress('call-2') });
      const states: Record<string, ToolCallState> = {
        'call-1': { callId: 'c1', toolName: 'lookup', arguments: {}, value: 'executing', progressCount: 1 },
        'call-2': { callId: 'c2', toolName: 'shell', arguments: {}, value: 'executing', progressCount: 1 },
      };
      const context = epicContext(scheduler, { streams: () => cold<StreamHead>('-----|'), state: <S>(s: string) => states[s] as S | undefined });
      const commands = toolCallRecovery({ rerun: (call) => call.toolName === 'lookup' })(runes, context, undefined);
      expectObservable(commands).toBe('---b', { b: { stream: 'call-2', event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART } } });
    });
  });

  it('refuses a rerun that is not a function', () => {
    expect(() => toolCallRecovery({ rerun: true as never })).toThrow('toolCallRecovery: "rerun" must be a function of the call, got boolean');
  });
});
