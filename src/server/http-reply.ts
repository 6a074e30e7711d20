import type { ServerResponse } from 'node:http';

/**
 * An HTTP error body: the same stable `code`s as the protocol's errors, plus `unauthorized`,
 * `forbidden_origin`, `forbidden_host`, `not_found`, `method_not_allowed`.
 */
export interface HttpError {
  readonly ok: false;
  readonly code: string;
  readonly message: string;
}

/** Sends a JSON body with a status. */
export function replyJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Sends `{ok: false, code, message}` with a status. */
export function replyError(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  replyJson(res, status, { ok: false, code, message } satisfies HttpError, headers);
}

/** A request refused before any route or upgrade: its status, body and extra headers. */
export interface HttpRefusal {
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Sends a refusal as `{ok: false, code, message}`. */
export function replyRefusal(res: ServerResponse, refusal: HttpRefusal): void {
  replyError(res, refusal.status, refusal.code, refusal.message, { ...refusal.headers });
}
