import type { ServerResponse } from 'node:http';
import { ArchivalRequestError, archiveTarget, restoreTarget, type ArchivalHost, type ArchivalRequestCode } from '../effects/archival/archival-requests.js';
import { errorText } from '../reducers/error-text.js';
import { askAuthorize, type Authorize } from './access.js';
import { replyError, replyJson } from './http-reply.js';
import type { Route, RouteContext } from './routes.js';

/** Options of {@link archivalRoutes}: what the requests work on, and who may make them. */
export interface ArchivalRoutesOptions extends ArchivalHost {
  /**
   * The server's authorization hook (give the one passed to `createServer`): archiving or
   * restoring a target needs `'drive'` on it. Default: every request the server lets in may.
   */
  readonly authorize?: Authorize;
  /** How long an archive request waits for its run before answering 504 `timeout` (the run goes on). Default 60,000 ms. */
  readonly timeoutMs?: number;
}

/** The HTTP status of each refusal. */
const STATUS: Readonly<Record<ArchivalRequestCode, number>> = {
  unknown_stream: 404,
  not_sealed: 409,
  archive_running: 409,
  invalid_restore: 409,
  timeout: 504,
  not_archived: 404,
  checksum_mismatch: 422,
  missing_segment: 422,
  invalid_manifest: 422,
  invalid_segment: 422,
  cold_store_failed: 502,
};

/**
 * The archival routes, for `createServer({ routes })` (`runestream serve` adds them when its
 * configuration has `archival`): what `runestream archive` and `runestream restore` call, so the
 * one process that writes the SQLite file does the work.
 *
 * - `POST /archive/:target`: archives the target (a stream id, percent-encoded: `conv%2Fc1`)
 *   and answers 200 `{ ok: true, outcome: 'archived', streams }`, or `{ ok: true, outcome:
 *   'retrying', attempts, error }` when a write failed (the run retries with backoff).
 * - `POST /restore/:target`: puts its archived runes back in the hot log: 200 `{ ok: true,
 *   target, streams: [{ stream, runes }] }`.
 * - Refusals: 403 `forbidden` (no `'drive'` on the target), 404 `unknown_stream` or
 *   `not_archived`, 409 `not_sealed`, `archive_running` or `invalid_restore`, 422
 *   `checksum_mismatch` (naming the segment) and the archive's other codes, 502
 *   `cold_store_failed`, 504 `timeout`.
 */
export function archivalRoutes(options: ArchivalRoutesOptions): Route[] {
  const { authorize = () => true, timeoutMs } = options;
  const answer =
    (work: (target: string) => Promise<object>) =>
    async (_req: unknown, res: ServerResponse, { params, access }: RouteContext): Promise<void> => {
      const target = params.target!;
      const allowed = await askAuthorize(authorize, access, target, 'drive');
      if (allowed === 'failed') return replyError(res, 500, 'internal', `the authorization hook failed for stream "${target}"`);
      if (!allowed) return replyError(res, 403, 'forbidden', `not allowed to drive stream "${target}"`);
      try {
        replyJson(res, 200, { ok: true, ...(await work(target)) });
      } catch (error) {
        if (error instanceof ArchivalRequestError) return replyError(res, STATUS[error.code], error.code, error.message);
        replyError(res, 500, 'internal', errorText(error));
      }
    };
  return [
    { method: 'POST', path: '/archive/:target', handler: answer((target) => archiveTarget(options, target, timeoutMs === undefined ? {} : { timeoutMs })) },
    { method: 'POST', path: '/restore/:target', handler: answer((target) => restoreTarget(options, target)) },
  ];
}
