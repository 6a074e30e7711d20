import { describe, expect, it } from 'vitest';
import { createEngine } from '../../../src/index.js';
import { scriptedModel } from '../../../src/agents.js';
import { createMetrics } from '../../../src/server/index.js';
import { ManualClock, answering, runChain } from '../llm/support.js';

describe('runestream_model_calls_total', () => {
  it('counts every provider a chain tried, by outcome, whether or not its breaker recorded it', async () => {
    const clock = new ManualClock();
    const engine = createEngine({ scheduler: clock });
    const metrics = createMetrics();
    const stop = metrics.observe(engine);
    try {
      const chain = {
        providers: [
          { name: 'flaky', model: scriptedModel([{ error: 'HTTP 500' }], { modelId: 'flaky', whenExhausted: 'cycle' }) },
          { name: 'steady', model: answering('steady', 'ok') },
        ],
      };
      for (let i = 0; i < 3; i++) expect((await runChain(engine, chain, clock)).error).toBeUndefined();
      const counted = (await metrics.registry.getSingleMetric('runestream_model_calls_total')!.get()).values.map(({ labels, value }) => [
        labels.provider,
        labels.outcome,
        value,
      ]);
      // steady's breaker recorded one success (its first: it was spawned); the metric has all three.
      expect(counted).toEqual(
        expect.arrayContaining([
          ['flaky', 'failure', 3],
          ['steady', 'success', 3],
        ]),
      );
      expect(counted).toHaveLength(2);
    } finally {
      stop();
      await engine.close();
    }
  });
});
