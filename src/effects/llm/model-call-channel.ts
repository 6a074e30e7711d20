import { channel } from 'node:diagnostics_channel';

/**
 * The `node:diagnostics_channel` channel a provider chain publishes each model call's outcome on
 * (`chainCall$`): a {@link ModelCallReport} per provider tried. The metrics count model calls
 * from it, since a breaker records a success only when it changes the breaker.
 */
export const MODEL_CALL_CHANNEL = 'runestream:model:call';

/** One provider's call in a chain: its provider's name, and whether it answered. */
export interface ModelCallReport {
  readonly provider: string;
  readonly outcome: 'success' | 'failure';
}

export const modelCallChannel = channel(MODEL_CALL_CHANNEL);

/** Publishes a call's outcome, when someone listens. */
export function reportModelCall(report: ModelCallReport): void {
  if (modelCallChannel.hasSubscribers) modelCallChannel.publish(report);
}
