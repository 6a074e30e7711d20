import { defer, filter, from, ignoreElements, map, mergeMap, type Observable } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { Rune } from '../../src/reducers/rune.js';
import type { RuneStore } from '../../src/streams/store.js';
import { ACTION_KINDS, type ActionKind } from '../../sim/actions.js';
import { rootTag } from '../../sim/fake-llm.js';
import { runSeed } from '../../sim/run-seed.js';
import { largestTimeout, type World } from '../../sim/world.js';

/**
 * The simulation's own tests: a seed replays byte for byte, and each oracle catches a defect
 * planted where it looks (a tool that runs twice, a store that loses acknowledged runes, a turn
 * nothing runs, a component that spends outside the budget, text the model never sent).
 */

/** Only these actions (and time passing): a planted defect is then the first thing found. */
const only = (...kinds: ActionKind[]): Partial<Record<ActionKind, number>> =>
  Object.fromEntries(ACTION_KINDS.filter((kind) => kind !== 'wait').map((kind) => [kind, kinds.includes(kind) ? 5 : 0]));

describe('the simulation', () => {
  it('replays a seed exactly: two runs of one seed write byte-identical logs', async () => {
    const first = await runSeed(3, { steps: 80 });
    const second = await runSeed(3, { steps: 80 });
    expect(first.runes).toBeGreaterThan(300); // a run that did something
    expect(first.crashes).toBeGreaterThan(0);
    expect(second.transcript).toBe(first.transcript);
    const other = await runSeed(4, { steps: 80 });
    expect(other.transcript).not.toBe(first.transcript);
  });

  it('runs processes with the file in a thread of their own and in the event loop, and such a seed replays exactly', async () => {
    const threads: string[][] = [];
    const probe = {
      name: 'threads',
      final: (world: World) => {
        threads.push([...world.storeThreads]);
        return undefined;
      },
    };
    const first = await runSeed(11, { steps: 60, mix: only('conversation', 'message', 'crash'), extraOracles: [probe] });
    const second = await runSeed(11, { steps: 60, mix: only('conversation', 'message', 'crash'), extraOracles: [probe] });
    expect(first.failures).toEqual([]);
    expect(threads[0]).toContain('own thread');
    expect(threads[0]).toContain('event loop');
    expect(threads[1]).toEqual(threads[0]);
    expect(second.transcript).toBe(first.transcript);
  });

  it('judges liveness only once the log has been quiet for its window, also after a last action that jumped past the window from the last client action', async () => {
    // Seed 7's chats: its last jump goes past the window after the last chat, while the work that chat set moving still runs.
    const judged: { now: number; lastRuneAt: number; window: number }[] = [];
    const probe = {
      name: 'quiet',
      final: (world: World) => {
        judged.push({ now: world.clock.now, lastRuneAt: world.log.at(-1)?.at ?? 0, window: 2 * largestTimeout(world.settings) + 60_000 });
        return undefined;
      },
    };
    await runSeed(7, { steps: 8, mix: only('chat', 'jump'), extraOracles: [probe] });
    expect(judged).toHaveLength(1);
    const [{ now, lastRuneAt, window }] = judged as [(typeof judged)[number]];
    expect(now - lastRuneAt).toBeGreaterThanOrEqual(window);
  });

  it('catches a tool that runs its side effect twice for one call (the side-effect oracle)', async () => {
    const result = await runSeed(5, { steps: 60, mix: only('conversation', 'message', 'approve'), plant: (world) => world.tools.runTwice.add('note').add('job') });
    expect(result.newFailure?.oracle).toBe('side effects');
    expect(result.newFailure?.message).toMatch(/tool "(note|job)" ran 2 times for the call .*\/call\//);
  });

  it('catches a client feed with a gap where the replay meets the live runes (the watches oracle)', async () => {
    /** Every feed skips the second rune it would hear. */
    const skipping = (runes$: Observable<Rune>): Observable<Rune> => runes$.pipe(filter((_, index) => index !== 1));
    const result = await runSeed(2, { steps: 40, mix: only('conversation', 'message', 'crash'), planted: { feed: skipping } });
    expect(result.newFailure?.oracle).toBe('watches');
    expect(result.newFailure?.message).toMatch(/^a client watching \S+ after seq \d+ \(process \d+\): heard \S+ seq (\d+) where seq \d+ was due$/);
  });

  it('catches a store that acknowledges runes it never keeps (the log oracle)', async () => {
    /** Every rune of the first chat actor after its second is acknowledged, and lost. */
    const losing = (store: RuneStore): RuneStore => {
      let victim: string | undefined;
      const kept = (rune: Rune): boolean => {
        if (victim === undefined && rune.machine === 'chat-actor') victim = rune.stream;
        return !(rune.stream === victim && rune.seq > 2);
      };
      return {
        ...store,
        append: (runes, options) => store.append(runes.filter(kept), options),
      };
    };
    const result = await runSeed(6, { steps: 40, mix: only('chat'), planted: { store: losing } });
    expect(result.newFailure?.oracle).toBe('log');
    expect(result.newFailure?.message).toMatch(/^chat\/h1\/actor\/1 seq 3 was acknowledged but the file lost it/);
  });

  it('catches an agent left spawning with nobody working on it (the liveness oracle)', async () => {
    // An agent whose turn stream (`<root>/agent/<a>/turn`) never comes: nothing readies it.
    const stray = () => [() => from([{ stream: 'conv/stray/agent/a', spawn: 'agent-lifecycle', input: { agentId: 'a' } }])];
    const result = await runSeed(7, { steps: 20, mix: only('badInput'), planted: { epics: stray } });
    expect(result.newFailure?.oracle).toBe('liveness');
    expect(result.newFailure?.message).toContain('conv/stray/agent/a (agent-lifecycle) in "spawning"');
  });

  it("catches a turn whose text is not the model's (the turn text oracle, from the model API's record of what each call sent)", async () => {
    // A stray delta in each turn that starts: text no model call sent.
    const forging = () => [
      (runes$: import('rxjs').Observable<Rune>) =>
        runes$.pipe(
          filter((rune) => rune.machine === 'turn-engine' && rune.kind === 'turn.started'),
          map((rune) => ({ stream: rune.stream, event: { type: 'assistant_delta', content: 'forged' } })),
        ),
    ];
    const result = await runSeed(9, { steps: 40, mix: only('conversation', 'message'), planted: { epics: forging } });
    expect(result.newFailure?.oracle).toBe('turn text');
    expect(result.newFailure?.message).toMatch(/^conv\/c\d+\/agent\/[^ ]+\/turn seq \d+ \(turn\.\w+\): its response's text "forged/);
  });

  it("catches model calls made for a conversation outside its budget (the budget oracle, from the model API's own count)", async () => {
    // After each of a conversation's turns, three more calls in its name that no budget sees.
    const overspend = (world: World) => [
      (runes$: import('rxjs').Observable<Rune>) =>
        runes$.pipe(
          // A turn's end, as its agent hears it (the conversation hears of it only on an error streak's change).
          filter((rune) => rune.machine === 'agent-lifecycle' && rune.kind === 'turn.completed'),
          mergeMap((rune) => from([1, 2, 3]).pipe(map(() => rune.stream.slice(0, rune.stream.indexOf('/agent/'))))),
          mergeMap((root) =>
            defer(async () => {
              const call = await world.llm.model('p1').doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: `more ${rootTag(root)}` }] }] });
              const reader = call.stream.getReader();
              while (!(await reader.read()).done);
            }).pipe(ignoreElements()),
          ),
        ),
    ];
    const result = await runSeed(8, { steps: 60, mix: only('conversation', 'message'), planted: { epics: overspend } });
    // What matters is that the budget oracle names the overspending.
    const found = result.failures.find((failure) => failure.oracle === 'budget');
    expect(found?.message).toMatch(/^the model API answered \d+ calls for conv\/c\d+'s agents \(0 of a ReAct loop\)/);
  });
});
