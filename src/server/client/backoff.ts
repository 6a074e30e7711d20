// The backoff is pure arithmetic shared with the server's effects, so it lives with the reducers.
export { DEFAULT_BACKOFF, backoffDelay, resolveBackoff, type BackoffOptions } from '../../reducers/backoff.js';
