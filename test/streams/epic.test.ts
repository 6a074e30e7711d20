import { EMPTY, VirtualTimeScheduler, filter, firstValueFrom, map, mergeMap, of, throwError, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { runesOf } from '../../src/store-kit.js';
import { createEngine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { isSpawnCommand, runEpics, type Epic, type EpicCommand, type EpicContext, type EpicReport } from '../../src/streams/epic.js';
import { epicContext } from '../support/epic-context.js';

const rune = (stream: string, seq: number, kind: string): Rune => ({ stream, seq, machine: 'chat-actor', kind, event: { type: kind }, at: 0 });
const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

describe('runEpics', () => {
  it('reports a failing epic, resubscribes it after a doubling backoff, and the other epic carries on', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, flush }) => {
      // a at 0 s, b at 1.5 s, c at 4 s, d at 9 s: each after the previous resubscription.
      const runes = hot<Rune>('a 1499ms b 2499ms c 4999ms d', {
        a: rune('s', 1, 'boom'),
        b: rune('s', 2, 'boom'),
        c: rune('s', 3, 'boom'),
        d: rune('s', 4, 'ok'),
      });
      // Fails on every "boom", and is back after 1 s, then 2 s, then 4 s, hearing only later runes.
      const fragile: Epic = function fragile(runes$) {
        return runes$.pipe(mergeMap((r) => (r.kind === 'boom' ? throwError(() => new Error(`boom at ${r.seq}`)) : of({ stream: r.stream, event: { type: 'Ping' } }))));
      };
      const echo: Epic = (runes$) => runes$.pipe(map((r): EpicCommand => ({ stream: r.stream, event: { type: `echo-${r.seq}` } })));
      const dispatched: string[] = [];
      const reports: EpicReport[] = [];
      runEpics({
        epics: [fragile, echo],
        runes$: runes,
        deps: undefined,
        context: epicContext(scheduler),
        dispatch: (c, sink, token) => {
          dispatched.push(`${scheduler.now()}:${isSpawnCommand(c) ? `spawn ${c.spawn}` : c.event.type}`);
          sink.result({ accepted: true, rune: rune(c.stream, 1, 'accepted') }, token);
        },
        report: (r) => reports.push(r),
      });
      flush();
      expect(reports.map((r) => (r.type === 'epic_failed' ? `${r.epic} ${String(r.error)} retry in ${r.retryInMs}` : r.type))).toEqual([
        'fragile Error: boom at 1 retry in 1000',
        'fragile Error: boom at 2 retry in 2000',
        'fragile Error: boom at 3 retry in 4000',
      ]);
      expect(dispatched).toEqual(['0:echo-1', '1500:echo-2', '4000:echo-3', '9000:echo-4', '9000:Ping']);
    });
  });

  it('reports a command the engine rejected, with the epic that emitted it', async () => {
    const reports: EpicReport[] = [];
    const engine = createEngine({
      epics: [
        function completesAtOnce(runes$) {
          return runes$.pipe(
            filter((r) => r.kind === 'ProcessInteraction'),
            mergeMap((r) => {
              const done: EpicCommand = { stream: r.stream, event: { type: 'InteractionComplete', success: true } };
              return of(done, done); // the second finds the actor idle already
            }),
          );
        },
      ],
    });
    engine.errors$.subscribe((r) => reports.push(r as EpicReport));
    await engine.spawn('a', 'chat-actor');
    await engine.dispatch('a', { type: 'ProcessInteraction', userId });
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(reports).toEqual([
      {
        type: 'command_rejected',
        epic: 'completesAtOnce',
        command: { stream: 'a', event: { type: 'InteractionComplete', success: true } },
        code: 'not_allowed',
        reason: 'event "InteractionComplete" is not allowed in state "idle"',
      },
    ]);
    await engine.close();
  });
});

describe('engine epics', () => {
  it('hears live runes only: hydrating a stream replays nothing to them', async () => {
    const heard: string[] = [];
    const listener: Epic = (runes$) => {
      runes$.subscribe((r) => heard.push(`${r.stream}:${r.seq}`));
      return EMPTY;
    };
    const engine = createEngine({ epics: [listener] });
    await engine.spawn('a', 'chat-actor');
    await engine.dispatch('a', { type: 'Pause' });
    engine.release('a');
    await engine.dispatch('a', { type: 'ProcessInteraction', userId }); // hydrates seq 1..2 first
    expect(heard).toEqual(['a:1', 'a:2', 'a:3']);
    await engine.close();
  });

  it('keeps dispatching for other epics and callers while one epic fails and is retried', async () => {
    // Capped: the failing epic retries forever, every 30 s once the backoff is at its maximum.
    const scheduler = new VirtualTimeScheduler(undefined, 60_000);
    const reports: string[] = [];
    const engine = createEngine({
      scheduler,
      epics: [
        function alwaysFails() {
          return throwError(() => new Error('nope'));
        },
        function pausesNewChats(runes$) {
          return runes$.pipe(
            filter((r) => r.kind === 'spawned'),
            map((r): EpicCommand => ({ stream: r.stream, event: { type: 'Pause', reason: 'new' } })),
          );
        },
      ],
    });
    engine.errors$.subscribe((r) => reports.push(r.type === 'epic_failed' ? `${r.epic} retry in ${r.retryInMs}` : r.type));
    await engine.spawn('a', 'chat-actor');
    await new Promise((r) => setImmediate(r));
    expect(await engine.dispatch('a', { type: 'ProcessInteraction', userId })).toMatchObject({ accepted: true, rune: { seq: 3, from: 'paused', to: 'idle' } });
    scheduler.flush(); // the retry timers: it fails again at 1 s, 2 s, ...; flushed up to the cap
    expect(reports.slice(0, 3)).toEqual(['alwaysFails retry in 1000', 'alwaysFails retry in 2000', 'alwaysFails retry in 4000']);
    await engine.close();
  });

  it('spawns the streams an epic asks for; a spawn of a stream that exists is no error; the context reads snapshots and history', async () => {
    const reports: EpicReport[] = [];
    const seen: unknown[] = [];
    const engine = createEngine({
      epics: [
        function callsOnPing(runes$, context) {
          return runes$.pipe(
            filter((r) => r.kind === 'Ping'),
            mergeMap(async (r) => {
              seen.push(
                await firstValueFrom(context.snapshot(r.stream)),
                (await firstValueFrom(context.read(r.stream).pipe(toArray()))).map((x) => x.kind),
              );
              const call: EpicCommand = { stream: 'call-1', spawn: 'tool-call', input: { callId: 'c1', toolName: 'clock', arguments: {} } };
              return [call, call, { stream: 'call-1', event: { type: 'no_approval_needed' } }] satisfies EpicCommand[];
            }),
            mergeMap((commands) => commands),
          );
        },
      ],
    });
    engine.errors$.subscribe((r) => reports.push(r as EpicReport));
    await engine.spawn('chat-1', 'chat-actor');
    const executing = firstValueFrom(engine.runes$('call-1').pipe(filter((r) => r.to === 'executing')));
    await engine.dispatch('chat-1', { type: 'Ping' });
    expect(await executing).toMatchObject({ seq: 2, kind: 'no_approval_needed' });
    expect(seen).toEqual([{ stream: 'chat-1', seq: 2, state: { value: 'idle' } }, ['spawned', 'Ping']]);
    expect(reports).toEqual([]);
    await engine.close();
  });

  it("reads a stream's history in pages, each rune once and in order, and a read of its last few runes is one store query", async () => {
    const store = memoryStore();
    await store.append(runesOf('log', 1, 2500));
    let reads = 0;
    const read = store.read.bind(store);
    store.read = (...args) => {
      reads++;
      return read(...args);
    };
    let context: EpicContext | undefined;
    const engine = createEngine({
      store,
      epics: [
        function keepsContext(_, epicContext) {
          context = epicContext;
          return EMPTY;
        },
      ],
    });
    await new Promise((resolve) => setImmediate(resolve));
    const all = await firstValueFrom(context!.read('log').pipe(toArray()));
    expect(all.map((rune) => rune.seq)).toEqual(Array.from({ length: 2500 }, (_, i) => i + 1));
    expect(reads).toBe(3); // 1,000 + 1,000 + a short page: the end
    reads = 0;
    expect((await firstValueFrom(context!.read('log', 2497).pipe(toArray()))).map((rune) => rune.seq)).toEqual([2498, 2499, 2500]);
    expect(reads).toBe(1);
    await engine.close();
  });
});
