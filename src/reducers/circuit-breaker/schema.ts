import { z } from 'zod';

/** Seed 002 "CircuitBreaker"; no state is terminal. */
export const CircuitBreakerStateName = z.enum(['CLOSED', 'OPEN', 'HALF_OPEN']);
export type CircuitBreakerStateName = z.infer<typeof CircuitBreakerStateName>;

/** The breaker's configuration, given at spawn and carried in the state so `transition` stays pure. */
export const CircuitBreakerInput = z.object({
  /** Consecutive failures in CLOSED that open the breaker. */
  failureThreshold: z.number().int().positive(),
  /** Consecutive successes in HALF_OPEN that close it again. */
  successThreshold: z.number().int().positive(),
  /** How long the breaker stays OPEN before the timer effect sends `open_timeout_elapsed`. */
  openTimeoutMs: z.number().int().nonnegative(),
  /** How many trial calls HALF_OPEN lets through at once (seed 002: "allows limited calls"); the rest skip the provider. Default 1. */
  halfOpenMaxCalls: z.number().int().positive().optional(),
});
export type CircuitBreakerInput = z.infer<typeof CircuitBreakerInput>;

/** The breaker's state: its state name, its configuration and its counters. */
export const CircuitBreakerState = z.object({
  value: CircuitBreakerStateName,
  ...CircuitBreakerInput.shape,
  /** Consecutive failures since the last success, reset or close. */
  failureCount: z.number().int().nonnegative(),
  /** Consecutive successes of the current HALF_OPEN trial; 0 in CLOSED and OPEN. */
  successCount: z.number().int().nonnegative(),
  /** The error of the most recent failure that reported one. */
  lastError: z.string().optional(),
  /** How long the current OPEN period lasts when the failure that opened it carried `retryAfterMs`; else `openTimeoutMs` applies. */
  openForMs: z.number().int().nonnegative().optional(),
  /**
   * An operator's `manual_keep_open` holds this OPEN breaker open: `open_timeout_elapsed` leaves it
   * OPEN (and no clock is armed) until `manual_reset`. Absent: not kept open.
   */
  keptOpen: z.literal(true).optional(),
});
export type CircuitBreakerState = z.infer<typeof CircuitBreakerState>;

/** The outcome of one call through the breaker, the timer, and the operator's two commands. */
export const CircuitBreakerEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('success') }),
  z.object({
    type: z.literal('failure'),
    error: z.string().optional(),
    /**
     * The provider asked not to be called for this long (an HTTP 429 or 503 with `Retry-After`):
     * the breaker opens at once, for this long instead of its `openTimeoutMs`.
     */
    retryAfterMs: z.number().int().nonnegative().optional(),
  }),
  z.object({ type: z.literal('open_timeout_elapsed') }),
  z.object({ type: z.literal('manual_reset') }),
  z.object({ type: z.literal('manual_keep_open') }),
  /**
   * The configured settings differ from the ones the breaker holds (they were edited): the new
   * ones, whole (a setting left out is back to its default). Recorded at start by the
   * `providerBreakers` epic, else by the chain before the breaker's next outcome: a change of
   * settings is in the log.
   */
  z.object({ type: z.literal('settings_changed'), settings: CircuitBreakerInput.strict() }),
]);
export type CircuitBreakerEvent = z.infer<typeof CircuitBreakerEvent>;
