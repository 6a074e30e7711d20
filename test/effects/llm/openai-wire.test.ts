import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError, StreamProviderError, type ModelMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelCall$, type ModelPart, type ModelRequest } from '../../../src/agents.js';
import { startChatCompletionsServer, type ChatCompletionsServer, type ScriptedReply } from '../../support/chat-completions-server.js';
import { collect, request } from './support.js';

/*
 * modelCall$ against chat completions streamed as OpenAI streams them (the SSE bytes below are
 * its format: every field, in its order, `usage: null` on each chunk when usage is asked for and
 * the usage in a last chunk with no choices), through @ai-sdk/openai-compatible, from a real
 * HTTP server on 127.0.0.1.
 */

/** One `chat.completion.chunk` event; `choices` and `usage` are JSON text, as sent. */
const event = (choices: string, usage = 'null'): string =>
  `data: {"id":"chatcmpl-CXq2b8Yv3kPz9","object":"chat.completion.chunk","created":1764288000,"model":"gpt-4o-mini-2024-07-18",` +
  `"service_tier":"default","system_fingerprint":"fp_560af6e559","choices":${choices},"usage":${usage},"obfuscation":"x7Q"}\n\n`;
const delta = (json: string, finish = 'null'): string => event(`[{"index":0,"delta":${json},"logprobs":null,"finish_reason":${finish}}]`);
const DONE = 'data: [DONE]\n\n';

/** Some text, then a tool call whose arguments come in four pieces, then the usage in the last chunk. */
const TOOL_CALL: readonly string[] = [
  delta('{"role":"assistant","content":"","refusal":null}'),
  delta('{"content":"Checking"}'),
  delta('{"content":" Oslo."}'),
  delta('{"tool_calls":[{"index":0,"id":"call_Qm3R8sVd2kXw","type":"function","function":{"name":"weather","arguments":""}}]}'),
  delta('{"tool_calls":[{"index":0,"function":{"arguments":"{\\""}}]}'),
  delta('{"tool_calls":[{"index":0,"function":{"arguments":"city"}}]}'),
  delta('{"tool_calls":[{"index":0,"function":{"arguments":"\\":\\"Os"}}]}'),
  delta('{"tool_calls":[{"index":0,"function":{"arguments":"lo\\"}"}}]}'),
  delta('{}', '"tool_calls"'),
  event(
    '[]',
    '{"prompt_tokens":84,"completion_tokens":19,"total_tokens":103,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},' +
      '"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}',
  ),
  DONE,
];

/** The body OpenAI answers a wrong API key with: HTTP 401, pretty-printed JSON. */
const UNAUTHORIZED = `{
    "error": {
        "message": "Incorrect API key provided: sk-test. You can find your API key in your account settings.",
        "type": "invalid_request_error",
        "param": null,
        "code": "invalid_api_key"
    }
}
`;

/** A conversation as the agent's transcript builds it: a tool was called, and answered. */
const history: ModelMessage[] = [
  { role: 'user', content: 'Weather in Oslo?' },
  {
    role: 'assistant',
    content: [
      { type: 'text', text: 'Checking.' },
      { type: 'tool-call', toolCallId: 'call_1', toolName: 'weather', input: { city: 'Oslo' } },
    ],
  },
  { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_1', toolName: 'weather', output: { type: 'json', value: { celsius: 4 } } }] },
  { role: 'user', content: 'And in Bergen?' },
];

/** What the server answers, by the request's `model`. */
const replies: Record<string, ScriptedReply> = {
  'tool-call': { sse: TOOL_CALL },
  // The same bytes cut mid-event: an SSE event split across TCP writes.
  'tool-call-split': { sse: [TOOL_CALL.join('').slice(0, 700), TOOL_CALL.join('').slice(700)] },
  unauthorized: { status: 401, errorBody: UNAUTHORIZED },
  'error-event': {
    sse: [
      delta('{"role":"assistant","content":""}'),
      delta('{"content":"Once"}'),
      'data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}\n\n',
      DONE,
    ],
  },
  dropped: { sse: [delta('{"role":"assistant","content":""}'), delta('{"content":"Once"}'), delta('{"content":" upon"}')], sseEnd: 'drop' },
  endless: { sse: [delta('{"role":"assistant","content":""}'), delta('{"content":"Once upon a time"}')], sseEnd: 'open' },
};

let server: ChatCompletionsServer;
beforeAll(async () => {
  server = await startChatCompletionsServer((body) => replies[String(body.model)] ?? { status: 404 });
});
afterAll(() => server.close());

const openai = (modelId: string) => createOpenAICompatible({ name: 'openai', baseURL: server.baseURL, apiKey: 'sk-test', includeUsage: true })(modelId);

describe('modelCall$ on the OpenAI chat-completions wire (SSE from a server on 127.0.0.1)', () => {
  it('streams the text, a tool call whose arguments came in pieces, and the finish with the usage of the last chunk', async () => {
    const { values, error } = await collect(modelCall$(openai('tool-call'), request));
    expect(error).toBeUndefined();
    expect(values).toEqual<ModelPart[]>([
      { type: 'text-delta', text: 'Checking' },
      { type: 'text-delta', text: ' Oslo.' },
      { type: 'tool-call', toolCallId: 'call_Qm3R8sVd2kXw', toolName: 'weather', input: { city: 'Oslo' } },
      {
        type: 'finish',
        finishReason: 'tool-calls',
        usage: { inputTokens: 84, outputTokens: 19, totalTokens: 103, cacheReadTokens: 64, reasoningTokens: 0 },
        model: 'tool-call',
        provider: 'openai.chat',
      },
    ]);
  });

  it('reads events cut across TCP writes alike', async () => {
    const whole = await collect(modelCall$(openai('tool-call'), request));
    const split = await collect(modelCall$(openai('tool-call-split'), request));
    expect(split.error).toBeUndefined();
    expect(split.values).toEqual(whole.values.map((part) => (part.type === 'finish' ? { ...part, model: 'tool-call-split' } : part)));
  });

  it('sends the conversation in the chat-completions format: tool calls, their results, the tools, tool choice auto', async () => {
    const withHistory: ModelRequest = { ...request, messages: history };
    await collect(modelCall$(openai('tool-call'), withHistory));
    expect(server.requests.at(-1)).toEqual({
      model: 'tool-call',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Weather in Oslo?' },
        {
          role: 'assistant',
          content: 'Checking.',
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '{"celsius":4}' },
        { role: 'user', content: 'And in Bergen?' },
      ],
      tools: [{ type: 'function', function: { name: 'weather', description: 'The weather in a city', parameters: request.tools.weather!.inputSchema } }],
      tool_choice: 'auto',
    });
  });

  it('errors with the provider’s APICallError for an HTTP 401, its message from the JSON body', async () => {
    const { values, error } = await collect(modelCall$(openai('unauthorized'), request));
    expect(values).toEqual([]);
    expect(APICallError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({
      statusCode: 401,
      isRetryable: false,
      message: 'Incorrect API key provided: sk-test. You can find your API key in your account settings.',
      responseBody: UNAUTHORIZED,
    });
  });

  it('errors with a StreamProviderError for an error event mid-stream, after the text before it', async () => {
    const { values, error } = await collect(modelCall$(openai('error-event'), request));
    expect(values).toEqual([{ type: 'text-delta', text: 'Once' }]);
    expect(StreamProviderError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', isRetryable: false });
  });

  it('errors with the provider’s error when the server drops the connection mid-stream, after the text before it', async () => {
    const { values, error } = await collect(modelCall$(openai('dropped'), request));
    expect(values).toEqual([
      { type: 'text-delta', text: 'Once' },
      { type: 'text-delta', text: ' upon' },
    ]);
    // The provider's own error: the body's read failed, as fetch reports a connection cut mid-body.
    expect(APICallError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ message: 'Failed to process successful response', statusCode: 200 });
    expect((error as Error).cause).toBeInstanceOf(TypeError);
    expect((error as Error).cause).toMatchObject({ message: 'terminated' });
  });

  // Without the abort the close never comes, and the test fails at its (generous) bound.
  it('closes the request when unsubscribed mid-stream: the server sees its socket close', { timeout: 5000 }, async () => {
    const before = server.requests.length;
    await new Promise<void>((resolve) => {
      const subscription = modelCall$(openai('endless'), request).subscribe((part) => {
        expect(part).toEqual({ type: 'text-delta', text: 'Once upon a time' });
        subscription.unsubscribe();
        resolve();
      });
    });
    // The server never ended this response: only the client's abort can close it.
    expect(await server.closed[before]).toEqual({ ended: false });
  });
});
