/** The longest part of a server's error body a {@link ProviderFailedError} keeps. */
export const MAX_ERROR_BODY_LENGTH = 2000;

/** The longest `Retry-After` honoured: a server asking for more gets its breaker opened this long. One hour. */
export const MAX_RETRY_AFTER_MS = 3_600_000;

/** The HTTP statuses whose `Retry-After` opens a breaker for that long: too many requests, unavailable. */
const RETRY_AFTER_STATUSES = new Set([429, 503]);

/** What an HTTP error from a provider carries (the AI SDK's `APICallError` has these fields). */
interface HttpErrorFields {
  readonly statusCode?: unknown;
  readonly responseHeaders?: unknown;
  readonly responseBody?: unknown;
}

const fieldsOf = (error: unknown): HttpErrorFields => (typeof error === 'object' && error !== null ? (error as HttpErrorFields) : {});

/**
 * How long a `Retry-After` header value asks to wait, in ms from `now`: delay-seconds or an HTTP
 * date (RFC 9110 §10.2.3), capped at {@link MAX_RETRY_AFTER_MS}; `undefined` when it is neither.
 * A date in the past is 0.
 *
 * @example
 * ```ts
 * import { retryAfterMsOf } from 'runestream/agents';
 * const now = Date.parse('Tue, 24 Nov 2026 10:00:00 GMT');
 * console.log(retryAfterMsOf('120', now), retryAfterMsOf('Tue, 24 Nov 2026 10:00:30 GMT', now), retryAfterMsOf('soon', now));
 * // Logs: 120000 30000 undefined
 * ```
 */
export function retryAfterMsOf(value: string, now: number): number | undefined {
  const text = value.trim();
  const ms = /^\d+$/.test(text) ? Number(text) * 1000 : /[a-z]/i.test(text) ? Date.parse(text) - now : NaN;
  return Number.isFinite(ms) ? Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.round(ms))) : undefined;
}

/**
 * A provider's failure in a chain call: which provider, and what its server said. The message
 * names the provider, the HTTP status and the server's error body (at most
 * {@link MAX_ERROR_BODY_LENGTH} characters of it); `cause` is the error as it came.
 */
export class ProviderFailedError extends Error {
  override readonly name = 'ProviderFailedError';
  /** The HTTP status of the server's answer, when it was an HTTP error. */
  readonly statusCode: number | undefined;
  /** The server's error body, cut to {@link MAX_ERROR_BODY_LENGTH} characters. */
  readonly responseBody: string | undefined;
  /** How long a 429 or 503 asked not to be called (its `Retry-After`), in ms. */
  readonly retryAfterMs: number | undefined;
  /** The message without the provider's name: what its circuit breaker records. */
  readonly detail: string;

  constructor(
    /** The provider's name in its chain. */
    readonly provider: string,
    cause: unknown,
    /** The clock an HTTP-date `Retry-After` is read against. */
    now: number,
    /**
     * What the chain's calls before this one used (the empty answers it fell over from, see
     * `fallenOverUsage`), when this provider failed in the middle of its answer: they still count.
     */
    readonly spent?: Readonly<Record<string, number>>,
  ) {
    const { statusCode, responseHeaders, responseBody } = fieldsOf(cause);
    const status = typeof statusCode === 'number' ? statusCode : undefined;
    const body = typeof responseBody === 'string' && responseBody.trim() !== '' ? cut(responseBody.trim(), MAX_ERROR_BODY_LENGTH) : undefined;
    const header = typeof responseHeaders === 'object' && responseHeaders !== null ? (responseHeaders as Record<string, unknown>)['retry-after'] : undefined;
    const retryAfterMs = status !== undefined && RETRY_AFTER_STATUSES.has(status) && typeof header === 'string' ? retryAfterMsOf(header, now) : undefined;
    const message = cause instanceof Error ? cause.message || cause.name : typeof cause === 'string' ? cause : String(JSON.stringify(cause));
    const statusText = status === undefined || message.includes(String(status)) ? '' : `HTTP ${status}: `;
    const bodyText = body === undefined || message.includes(body) ? '' : ` (server said: ${body})`;
    const detail = `${statusText}${message}${bodyText}`;
    super(`provider "${provider}" failed: ${detail}`, { cause });
    this.detail = detail;
    this.statusCode = status;
    this.responseBody = body;
    this.retryAfterMs = retryAfterMs;
  }
}

/** A model call that finished with no text and no tool call: no answer, so the chain falls over to the next provider. */
export class EmptyAnswerError extends Error {
  override readonly name = 'EmptyAnswerError';
  constructor(
    /** The finish reason the model gave, if it gave one. */
    readonly finishReason: string | undefined,
  ) {
    super(`the model answered nothing: no text and no tool call${finishReason === undefined ? '' : ` (finish reason "${finishReason}")`}`);
  }
}

const cut = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
