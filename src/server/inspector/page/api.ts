import type { Rune } from '../../../reducers/rune.js';
import type { DirectoryEntry } from '../stream-directory.js';
import type { InspectorMachine } from '../inspector.js';

/** A refusal of the inspector's API: its HTTP status, stable `code` and message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = 'runestream.token';

/** The token this tab was given, if any (kept for the tab's life only). */
export const savedToken = (): string | undefined => sessionStorage.getItem(TOKEN_KEY) ?? undefined;
export const saveToken = (token: string): void => sessionStorage.setItem(TOKEN_KEY, token);

/** The inspector's HTTP API, with the token if there is one. */
export class InspectorApi {
  constructor(readonly token: string | undefined) {}

  async #get<T>(path: string): Promise<T> {
    const response = await fetch(`/inspector/api/${path}`, { headers: this.token === undefined ? {} : { authorization: `Bearer ${this.token}` } });
    const body = (await response.json()) as T & { code?: string; message?: string };
    if (!response.ok) throw new ApiError(response.status, body.code ?? 'unknown', body.message ?? response.statusText);
    return body;
  }

  machines(): Promise<{ machines: InspectorMachine[] }> {
    return this.#get('machines');
  }

  runes(stream: string, afterSeq: number, limit = 1000): Promise<{ runes: Rune[]; headSeq: number; machine: string }> {
    return this.#get(`streams/${encodeURIComponent(stream)}/runes?afterSeq=${afterSeq}&limit=${limit}`);
  }

  state(stream: string, seq: number): Promise<{ state: unknown }> {
    return this.#get(`streams/${encodeURIComponent(stream)}/state?seq=${seq}`);
  }

  /**
   * The live list: `streams` (its first page) once, then `more` (its other pages) and `changes`;
   * `error` when it drops: `closed` true when EventSource gives up (the server refused it, e.g.
   * 503 `too_many_readers`), else it reconnects by itself.
   */
  feed(handlers: { streams(entries: DirectoryEntry[]): void; changes(entries: DirectoryEntry[]): void; open(): void; error(closed: boolean): void }): EventSource {
    const source = new EventSource(`/inspector/api/feed${this.token === undefined ? '' : `?token=${encodeURIComponent(this.token)}`}`);
    const entries = (event: Event): DirectoryEntry[] => JSON.parse((event as MessageEvent<string>).data) as DirectoryEntry[];
    source.addEventListener('streams', (event) => handlers.streams(entries(event)));
    for (const name of ['more', 'changes']) source.addEventListener(name, (event) => handlers.changes(entries(event)));
    source.addEventListener('open', () => handlers.open());
    source.addEventListener('error', () => handlers.error(source.readyState === EventSource.CLOSED));
    return source;
  }
}
