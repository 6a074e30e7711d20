import { TestScheduler } from 'rxjs/testing';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { chatActor, circuitBreaker, isRuneOf, ofMachine, toolCall, type Rune, type RuneOf, type ToolCallEvent, type ToolCallInput } from '../../src/index.js';

const rune = (machine: string, seq: number, event: Rune['event'], kind = event.type): Rune => ({ stream: `${machine}-1`, seq, machine, kind, event, at: seq });

const call = rune('tool-call', 2, { type: 'denied', reason: 'no' });
const chat = rune('chat-actor', 2, { type: 'InactivityTimeout' });
const breaker = rune('circuit-breaker', 3, { type: 'success' });

const marbles = (body: (helpers: Parameters<Parameters<TestScheduler['run']>[0]>[0]) => void): void => {
  new TestScheduler((actual, expected) => expect(actual).toStrictEqual(expected)).run(body);
};

describe('ofMachine', () => {
  it("keeps only the given machine's runes, in order, and passes completion", () => {
    marbles(({ hot, expectObservable, expectSubscriptions }) => {
      const runes$ = hot<Rune>('-a-b-c-a-|', { a: call, b: chat, c: breaker });
      expectObservable(runes$.pipe(ofMachine(toolCall))).toBe('-a-----a-|', { a: call });
      expectSubscriptions(runes$.subscriptions).toBe('^--------!');
    });
  });

  it('keeps the runes of every machine it is given', () => {
    marbles(({ hot, expectObservable }) => {
      const runes$ = hot<Rune>('-a-b-c-|', { a: call, b: chat, c: breaker });
      expectObservable(runes$.pipe(ofMachine(toolCall, circuitBreaker))).toBe('-a---c-|', { a: call, c: breaker });
    });
  });

  it('passes an error through and ends with the source', () => {
    marbles(({ hot, expectObservable, expectSubscriptions }) => {
      const runes$ = hot<Rune>('-b-a-#', { a: call, b: chat });
      expectObservable(runes$.pipe(ofMachine(toolCall))).toBe('---a-#', { a: call });
      expectSubscriptions(runes$.subscriptions).toBe('^----!');
    });
  });

  it('unsubscribes from the source when its subscriber leaves', () => {
    marbles(({ hot, expectObservable, expectSubscriptions }) => {
      const runes$ = hot<Rune>('-a-a-a-a-|', { a: call });
      expectObservable(runes$.pipe(ofMachine(toolCall)), '^--!').toBe('-a-', { a: call });
      expectSubscriptions(runes$.subscriptions).toBe('^--!');
    });
  });

  it("types the runes as the machine's: its events, its spawn and its state names", () => {
    marbles(({ cold }) => {
      const calls$ = cold<Rune>('a', { a: call }).pipe(ofMachine(toolCall));
      expectTypeOf(calls$).toEqualTypeOf<import('rxjs').Observable<RuneOf<typeof toolCall>>>();
      calls$.subscribe((r) => {
        expectTypeOf(r.event).toEqualTypeOf<ToolCallEvent | { type: 'spawn'; input: ToolCallInput }>();
        expectTypeOf(r.to).toEqualTypeOf<
          'pending_call' | 'awaiting_approval' | 'executing' | 'denied' | 'completed_result' | 'error_result' | 'timeout_result' | 'cancelled_result' | undefined
        >();
        if (r.event.type === 'denied') expectTypeOf(r.event.reason).toEqualTypeOf<string | undefined>();
        if (r.event.type === 'spawn') expectTypeOf(r.event.input).toEqualTypeOf<ToolCallInput>();
      });
      const two$ = cold<Rune>('a', { a: call }).pipe(ofMachine(toolCall, chatActor));
      two$.subscribe((r) => expectTypeOf(r).toEqualTypeOf<RuneOf<typeof toolCall> | RuneOf<typeof chatActor>>());
      const untyped: Rune = call;
      if (isRuneOf(chatActor, untyped)) expectTypeOf(untyped).toEqualTypeOf<RuneOf<typeof chatActor>>();
    });
  });
});
