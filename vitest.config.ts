import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // fast-check runs hundreds of sequences per machine; keep the default timeout generous.
    testTimeout: 30_000,
    // A hook that starts a browser or a process shares 2 noisy cores with every other test file; the
    // default 10 s failed CI once (chromium's launch in a beforeAll, its tests then reported as skipped).
    hookTimeout: 60_000,
  },
});
