import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One scripted answer of the chat-completions server. */
export interface ScriptedReply {
  /** The assistant's text (cline 2 reads its tools as XML inside it). */
  readonly text?: string;
  /** Native tool calls (`@ai-sdk/openai-compatible` clients such as kilo). */
  readonly toolCalls?: readonly { readonly name: string; readonly arguments: Record<string, unknown>; readonly id?: string }[];
  /** Answer with this HTTP status and an OpenAI-style error body instead. */
  readonly status?: number;
  /** Headers of that error answer (`retry-after`). */
  readonly headers?: Readonly<Record<string, string>>;
  /** That error answer's body as sent. Default: an OpenAI-style error, `scripted failure <status>`. */
  readonly errorBody?: string;
  /** A streamed answer's text in these pieces, one SSE chunk each, `deltaEveryMs` apart: a model that is slow to finish (its `text` comes first, if any). */
  readonly deltas?: readonly string[];
  /** The pause before each of `deltas`. Default 0. */
  readonly deltaEveryMs?: number;
  /**
   * A streamed answer byte for byte instead: these pieces of the body (SSE events as a server
   * writes them, or parts of one), each written on its own after a turn of the event loop.
   */
  readonly sse?: readonly string[];
  /**
   * How an `sse` answer ends once written: `'end'` (default) ends the response, `'open'` leaves it
   * open (a long answer the client may walk away from), `'drop'` destroys the connection
   * mid-response (a server or network that breaks).
   */
  readonly sseEnd?: 'end' | 'open' | 'drop';
}

/** A request the server received: its JSON body. */
export type ChatRequest = Record<string, unknown> & { readonly model?: string; readonly stream?: boolean; readonly messages?: unknown[] };

/** A scripted OpenAI-compatible server on 127.0.0.1: what real agent CLIs talk to in the tests. */
export interface ChatCompletionsServer {
  /** `http://127.0.0.1:<port>/v1` */
  readonly baseURL: string;
  /** Every chat-completions request so far, in order. */
  readonly requests: readonly ChatRequest[];
  /**
   * For each of those requests, in order: resolves when its connection closed, with whether the
   * server had ended the response by then (`false`: the client hung up, or the server dropped it).
   */
  readonly closed: readonly Promise<{ readonly ended: boolean }>[];
  close(): Promise<void>;
}

/**
 * Starts a chat-completions server whose answer to the n-th request (from 0) is `answer(request, n)`,
 * streamed as SSE chunks when the request asks for `stream`, else one JSON body. `GET /v1/models`
 * lists the model `m`. Any other path is a 404.
 */
export async function startChatCompletionsServer(answer: (request: ChatRequest, index: number) => ScriptedReply): Promise<ChatCompletionsServer> {
  const requests: ChatRequest[] = [];
  const closed: Promise<{ ended: boolean }>[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (raw += chunk));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0];
      if (req.method === 'GET' && path === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model', owned_by: 'test' }] }));
        return;
      }
      if (req.method !== 'POST' || path !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      const request = JSON.parse(raw) as ChatRequest;
      const reply = answer(request, requests.length);
      requests.push(request);
      closed.push(new Promise((resolve) => res.on('close', () => resolve({ ended: res.writableFinished }))));
      if (reply.sse !== undefined) writeSse(res, reply.sse, reply.sseEnd ?? 'end');
      else if (reply.status === undefined) respond(res, request, reply);
      else fail(res, reply.status, reply.headers, reply.errorBody);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    closed,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

function respond(res: ServerResponse, request: ChatRequest, reply: ScriptedReply): void {
  const model = request.model ?? 'm';
  const toolCalls = (reply.toolCalls ?? []).map((call, index) => ({
    index,
    id: call.id ?? `call_${index}`,
    type: 'function',
    function: { name: call.name, arguments: JSON.stringify(call.arguments) },
  }));
  const finish = toolCalls.length > 0 ? 'tool_calls' : 'stop';
  const base = { id: 'chatcmpl-scripted', created: Math.floor(Date.now() / 1000), model };
  if (request.stream !== true) {
    const text = reply.deltas === undefined ? reply.text : `${reply.text ?? ''}${reply.deltas.join('')}`;
    const message = { role: 'assistant', content: text ?? null, ...(toolCalls.length > 0 ? { tool_calls: toolCalls.map(({ index: _, ...call }) => call) } : {}) };
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage }));
    return;
  }
  const chunk = (choices: unknown[], extra: object = {}) => `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(chunk([{ index: 0, delta: { role: 'assistant', content: '' } }]));
  if (reply.text !== undefined) res.write(chunk([{ index: 0, delta: { content: reply.text } }]));
  const finishStream = (): void => {
    if (toolCalls.length > 0) res.write(chunk([{ index: 0, delta: { tool_calls: toolCalls } }]));
    res.write(chunk([{ index: 0, delta: {}, finish_reason: finish }]));
    res.write(chunk([], { usage }));
    res.end('data: [DONE]\n\n');
  };
  const deltas = [...(reply.deltas ?? [])];
  if (deltas.length === 0) return finishStream();
  // The rest of the answer, a piece at a time; a client that hangs up (killed) stops it.
  const timer = setInterval(() => {
    const delta = deltas.shift();
    if (delta !== undefined) res.write(chunk([{ index: 0, delta: { content: delta } }]));
    if (deltas.length === 0) {
      clearInterval(timer);
      finishStream();
    }
  }, reply.deltaEveryMs ?? 0);
  res.on('close', () => clearInterval(timer));
}

function writeSse(res: ServerResponse, pieces: readonly string[], end: 'end' | 'open' | 'drop'): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  const rest = [...pieces];
  const next = (): void => {
    if (res.destroyed) return;
    const piece = rest.shift();
    if (piece !== undefined) {
      res.write(piece);
      setImmediate(next);
    } else if (end === 'end') res.end();
    else if (end === 'drop') res.destroy();
  };
  next();
}

function fail(res: ServerResponse, status: number, headers: Readonly<Record<string, string>> = {}, body?: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json', ...headers })
    .end(body ?? JSON.stringify({ error: { message: `scripted failure ${status}`, type: 'server_error' } }));
}
