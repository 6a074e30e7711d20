import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import { SimClock } from '../../sim/clock.js';
import { FakeLlm, rootTag } from '../../sim/fake-llm.js';
import { Random } from '../../sim/random.js';

/** The simulation's model API keeps its own books: the budget oracle trusts them. */
describe("the simulation's model API", () => {
  it("tells its listeners a planner's answered call as the plan's (plan:<root>), not the conversation's", async () => {
    const clock: SimClock = new SimClock(() => llm.parts);
    const llm = new FakeLlm({ random: new Random(1), clock, failureRate: 0 });
    const told: string[] = [];
    llm.onAnswered((key, book) => told.push(`${key} ${book.answered}`));
    const tag = rootTag('conv/c1');
    const call = {
      prompt: [
        { role: 'system', content: `You plan work. ${tag}` },
        { role: 'user', content: [{ type: 'text', text: `Ship it ${tag}` }] },
      ],
    } as LanguageModelV4CallOptions;
    const { stream } = await llm.model('p1').doStream(call);
    const reader = stream.getReader();
    const reading = (async () => {
      while (!(await reader.read()).done);
    })();
    // Virtual time for the answer's parts, however slow the seed makes them.
    await clock.advance(600_000);
    await reading;
    expect(told).toEqual(['plan:conv/c1 1']);
    expect(llm.books.has('conv/c1')).toBe(false);
  });
});
