import { EMPTY, of, type SchedulerLike } from 'rxjs';
import type { EpicContext } from '../../src/index.js';

/** An epic's context for a test without an engine: nothing in memory, nothing stored, unless overridden. */
export const epicContext = (scheduler: SchedulerLike, overrides: Partial<EpicContext> = {}): EpicContext => ({
  state: () => undefined,
  snapshot: () => of(undefined),
  read: () => EMPTY,
  release: () => {},
  streams: () => EMPTY,
  scheduler,
  ...overrides,
});
