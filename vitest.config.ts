import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // fast-check runs hundreds of sequences per machine; keep the default timeout generous.
    testTimeout: 30_000,
  },
});
