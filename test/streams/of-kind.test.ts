import { Subject, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { edgesOf } from '../../src/reducers/table.js';
import { machines, ofKind, ofMachine, toolCall, turnEngine, type Rune, type RuneOf, type ToolCallEvent, type TurnEngineEvent } from '../../src/index.js';

const rune = (seq: number, event: Rune['event'], kind = event.type, machine = 'turn-engine'): Rune => ({ stream: `${machine}-1`, seq, machine, kind, event, at: seq });

const start = rune(2, { type: 'start_turn', input: 'hi' });
const delta = rune(3, { type: 'delta', text: 'h' });
const interrupt = rune(4, { type: 'interrupt', reason: 'stop' });
const result = rune(5, { type: 'success', output: 'ok' }, 'tool.result', 'tool-call');

const marbles = (body: (helpers: Parameters<Parameters<TestScheduler['run']>[0]>[0]) => void): void => {
  new TestScheduler((actual, expected) => expect(actual).toStrictEqual(expected)).run(body);
};

describe('ofKind', () => {
  it('keeps only the runes of the kinds it is given, in order, and passes completion', () => {
    marbles(({ hot, expectObservable, expectSubscriptions }) => {
      const runes$ = hot<Rune>('-s-d-i-r-|', { s: start, d: delta, i: interrupt, r: result });
      expectObservable(runes$.pipe(ofKind('interrupt', 'tool.result'))).toBe('-----i-r-|', { i: interrupt, r: result });
      expectSubscriptions(runes$.subscriptions).toBe('^--------!');
    });
  });

  it('passes an error through and unsubscribes when its subscriber leaves', () => {
    marbles(({ hot, expectObservable, expectSubscriptions }) => {
      const failing$ = hot<Rune>('-s-i-#', { s: start, i: interrupt });
      expectObservable(failing$.pipe(ofKind('start_turn'))).toBe('-s---#', { s: start });
      expectSubscriptions(failing$.subscriptions).toBe('^----!');
      const long$ = hot<Rune>('-s-s-s-|', { s: start });
      expectObservable(long$.pipe(ofKind('start_turn')), '^--!').toBe('-s-', { s: start });
      expectSubscriptions(long$.subscriptions).toBe('^--!');
    });
  });

  it('narrows the event where the kind is the event type, and leaves it whole where it is not', () => {
    const turns$ = new Subject<RuneOf<typeof turnEngine>>();
    expectTypeOf(turns$.pipe(ofKind('interrupt'))).toEqualTypeOf<Observable<Rune<Extract<TurnEngineEvent, { type: 'interrupt' }>, RuneOf<typeof turnEngine>['to'] & string> & { kind: 'interrupt' }>>();
    turns$.pipe(ofKind('start_turn', 'interrupt')).subscribe((r) => {
      expectTypeOf(r.kind).toEqualTypeOf<'start_turn' | 'interrupt'>();
      expectTypeOf(r.event).toEqualTypeOf<Extract<TurnEngineEvent, { type: 'start_turn' | 'interrupt' }>>();
    });
    // A seed kind names several events (`tool.result`) or the spawn (`tool.call`): no narrowing.
    const calls$ = new Subject<Rune>();
    calls$.pipe(ofMachine(toolCall), ofKind('tool.result', 'denied')).subscribe((r) => {
      expectTypeOf(r.event).toEqualTypeOf<RuneOf<typeof toolCall>['event']>();
    });
    calls$.pipe(ofMachine(toolCall), ofKind('denied')).subscribe((r) => {
      expectTypeOf(r.event).toEqualTypeOf<Extract<ToolCallEvent, { type: 'denied' }>>();
    });
    // Untyped runes keep their untyped event.
    calls$.pipe(ofKind('denied')).subscribe((r) => expectTypeOf(r.event).toEqualTypeOf<Rune['event']>());
  });

  it("is sound for every shipped machine: no rune kind is another event's type", () => {
    const clashes: string[] = [];
    for (const machine of Object.values(machines)) {
      if (machine.events.includes(machine.spawnKind)) clashes.push(`${machine.id}: spawn kind ${machine.spawnKind}`);
      if (!('table' in machine)) continue;
      for (const edge of edgesOf(machine)) {
        if (edge.kind !== edge.on && machine.events.includes(edge.kind)) clashes.push(`${machine.id}: ${edge.on} appends ${edge.kind}`);
      }
    }
    expect(clashes).toEqual([]);
  });
});
