import { asapScheduler, ignoreElements, of, tap, type Observable } from 'rxjs';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createEngine, toolCall, type EpicContext, type Snapshot, type ToolCallState } from '../../src/index.js';
import { epicContext } from '../support/epic-context.js';

describe('EpicContext typed by machine', () => {
  it("types state(stream, machine) and snapshot(stream, machine) as the machine's state", () => {
    const executing: ToolCallState = { value: 'executing', callId: 'c1', toolName: 'shell', arguments: null, progressCount: 0 };
    const context: EpicContext = epicContext(asapScheduler, { state: <S>() => executing as S, snapshot: <S>() => of({ stream: 'call-1', seq: 2, state: executing as S }) });
    expectTypeOf(context.state('call-1', toolCall)).toEqualTypeOf<ToolCallState | undefined>();
    expectTypeOf(context.snapshot('call-1', toolCall)).toEqualTypeOf<Observable<Snapshot<ToolCallState> | undefined>>();
    // Without the machine, the caller's type argument (default unknown), as before.
    expectTypeOf(context.state('call-1')).toEqualTypeOf<unknown>();
    expectTypeOf(context.snapshot<ToolCallState>('call-1')).toEqualTypeOf<Observable<Snapshot<ToolCallState> | undefined>>();
    expect(context.state('call-1', toolCall)?.toolName).toBe('shell');
  });

  it("gives an engine epic the stream's state when asked with its machine", async () => {
    const seen: string[] = [];
    const engine = createEngine({
      epics: [
        (runes$, context) =>
          runes$.pipe(
            tap((rune) => {
              const state = context.state(rune.stream, toolCall);
              if (state !== undefined) seen.push(`${rune.seq} ${state.value} ${state.toolName}`);
            }),
            ignoreElements(),
          ),
      ],
    });
    await Promise.resolve(); // epics start on the next microtask
    await engine.spawn('call-1', 'tool-call', { callId: 'c1', toolName: 'shell', arguments: null });
    await engine.dispatch('call-1', { type: 'no_approval_needed' });
    expect(seen).toEqual(['1 pending_call shell', '2 executing shell']);
    await engine.close();
  });
});
