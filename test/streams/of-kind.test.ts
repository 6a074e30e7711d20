import { Subject, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { edgesOf } from '../../src/reducers/table.js';
import { chatActor, machines, ofKind, ofMachine, toolCall, type ChatActorEvent, type Rune, type RuneOf, type ToolCallEvent } from '../../src/index.js';

const rune = (seq: number, event: Rune['event'], kind = event.type, machine = 'chat-actor'): Rune => ({ stream: `${machine}-1`, seq, machine, kind, event, at: seq });

const start = rune(2, { type: 'ProcessInteraction', userId: 'u1' });
const ping = rune(3, { type: 'Ping' });
const pause = rune(4, { type: 'Pause', reason: 'later' });
const result = rune(5, { type: 'success', output: 'ok' }, 'tool.result', 'tool-call');

const marbles = (body: (helpers: Parameters<Parameters<TestScheduler['run']>[0]>[0]) => void): void => {
  new TestScheduler((actual, expected) => expect(actual).toStrictEqual(expected)).run(body);
};

describe('ofKind', () => {
  it('keeps only the runes of the kinds it is given, in order, and passes completion', () => {
    marbles(({ hot, expectObservable, expectSubscriptions }) => {
      const runes$ = hot<Rune>('-s-d-i-r-|', { s: start, d: ping, i: pause, r: result });
      expectObservable(runes$.pipe(ofKind('Pause', 'tool.result'))).toBe('-----i-r-|', { i: pause, r: result });
      expectSubscriptions(runes$.subscriptions).toBe('^--------!');
    });
  });

  it('passes an error through and unsubscribes when its subscriber leaves', () => {
    marbles(({ hot, expectObservable, expectSubscriptions }) => {
      const failing$ = hot<Rune>('-s-i-#', { s: start, i: pause });
      expectObservable(failing$.pipe(ofKind('ProcessInteraction'))).toBe('-s---#', { s: start });
      expectSubscriptions(failing$.subscriptions).toBe('^----!');
      const long$ = hot<Rune>('-s-s-s-|', { s: start });
      expectObservable(long$.pipe(ofKind('ProcessInteraction')), '^--!').toBe('-s-', { s: start });
      expectSubscriptions(long$.subscriptions).toBe('^--!');
    });
  });

  it('narrows the event where the kind is the event type, and leaves it whole where it is not', () => {
    const actors$ = new Subject<RuneOf<typeof chatActor>>();
    expectTypeOf(actors$.pipe(ofKind('Pause'))).toEqualTypeOf<
      Observable<Rune<Extract<ChatActorEvent, { type: 'Pause' }>, RuneOf<typeof chatActor>['to'] & string> & { kind: 'Pause' }>
    >();
    actors$.pipe(ofKind('ProcessInteraction', 'Pause')).subscribe((r) => {
      expectTypeOf(r.kind).toEqualTypeOf<'ProcessInteraction' | 'Pause'>();
      expectTypeOf(r.event).toEqualTypeOf<Extract<ChatActorEvent, { type: 'ProcessInteraction' | 'Pause' }>>();
    });
    // A seed kind names several events (`tool.result`) or the spawn (`tool.call`): no narrowing.
    // `denied` is an event type but never a kind (its row appends `tool.denied`): narrowed, vacuously.
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
