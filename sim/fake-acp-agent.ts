import { PROTOCOL_VERSION, RequestError } from '@agentclientprotocol/sdk';
import type { InitializeResponse, NewSessionResponse, PromptResponse, RequestPermissionRequest, SessionNotification } from '@agentclientprotocol/sdk';
import { Observable, type Subscription } from 'rxjs';
import type { CliProgram } from '../src/agents.js';
import { AcpEnvelope, type AcpId } from '../src/effects/cli/acp-messages.js';
import type { FakeTurn } from './fake-cli-turn.js';
import { FakeProcess, type FakeRunContext } from './fake-process.js';

/** The prompt turn in progress. */
interface Prompt {
  readonly id: AcpId;
  readonly sessionId: string;
  /** Its scheduled steps: a cancel ends them as one. */
  readonly group: Subscription;
  /** The permission request awaiting the client's answer, and what the turn does with it. */
  permission?: { readonly id: number; readonly answered: (outcome: unknown) => void };
}

const PERMISSION_OPTIONS: RequestPermissionRequest['options'] = [
  { optionId: 'once', name: 'Allow once', kind: 'allow_once' },
  { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
];

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * A fake ACP agent (as kilo 7.7.7 behaves, test/fixtures/cli/kilo-7.7.7), speaking JSON-RPC 2.0
 * as NDJSON on its stdin and stdout; every answer comes after a drawn delay.
 *
 * - `initialize`: protocol version 1, `loadSession: true`. `session/new`: a new session id.
 *   `session/load` of a session an earlier process made: its messages replayed as
 *   `agent_message_chunk`s, then `{}`; of another, JSON-RPC error -32002.
 * - `session/prompt` runs a turn (a run's first prompt the turn chosen at its start, each later one
 *   a new one): its messages as `agent_message_chunk` updates (a `messageId` each); its ask as a
 *   `tool_call` (pending) and a `session/request_permission` request (options `once` /
 *   `reject`): allowed, the tool call goes `in_progress` then `completed` and the turn goes on;
 *   rejected, it ends `failed` and the turn ends (`end_turn`, no more text); cancelled, the turn
 *   ends `cancelled`. Then the prompt's answer: `end_turn` (complete, or a question: a last message
 *   ending in "?"), a JSON-RPC error -32603 (a failed model), an exit, or silence.
 * - `session/cancel` ends the turn in progress: nothing more of it is sent, and the prompt is
 *   answered `cancelled`.
 * - Stdin closed: it exits 0. Anything else it cannot use (an unknown method, a second prompt while
 *   one runs, a response to nothing it asked) is told to `world.protocolError`, and a request
 *   among them is answered with a JSON-RPC error.
 */
export const fakeAcpAgent =
  (context: FakeRunContext): CliProgram =>
  ({ stdin$ }) =>
    new Observable((subscriber) => {
      const fake = new FakeProcess(subscriber, context);
      const { world, record } = context;
      const bad = (text: string) => world.protocolError(record.pid, text);
      const sessions = new Set<string>();
      let prompts = 0;
      let prompt: Prompt | undefined;
      let nextRequestId = 0;
      /** Permission requests of cancelled turns: the client answers them `cancelled`, after the fact. */
      const abandoned = new Set<number>();

      const send = (message: object) => fake.print({ jsonrpc: '2.0', ...message });
      const respond = (id: AcpId, result: object) => send({ id, result });
      const refuse = (id: AcpId, error: RequestError) => send({ id, error: error.toErrorResponse() });
      const update = (sessionId: string, update: SessionNotification['update']) =>
        send({ method: 'session/update', params: { sessionId, update } satisfies SessionNotification });
      const endPrompt = (answer: (id: AcpId) => void) => {
        if (prompt === undefined) return;
        const { id } = prompt;
        prompt.group.unsubscribe();
        prompt = undefined;
        answer(id);
      };
      const stop = (stopReason: PromptResponse['stopReason']) => endPrompt((id) => respond(id, { stopReason } satisfies PromptResponse));

      /** The steps that stream one message. */
      const message = (sessionId: string, chunks: readonly string[]): (() => void)[] => {
        const messageId = world.nextId('fake-message');
        return chunks.map((chunk, i) => () => {
          update(sessionId, { sessionUpdate: 'agent_message_chunk', messageId, content: { type: 'text', text: i === 0 ? chunk : ` ${chunk}` } });
          if (i === chunks.length - 1) world.acpSessions.get(sessionId)?.push(chunks.join(' '));
        });
      };

      const runTurn = (current: Prompt, turn: FakeTurn) => {
        const { sessionId, group } = current;
        const { end } = turn;
        const [first = [], ...rest] = turn.messages;
        const question = end.type === 'question' ? [['Which', 'file', 'should', 'I', 'change', 'next?']] : [];
        const finish = () => {
          if (end.type === 'complete' || end.type === 'question') return stop('end_turn');
          if (end.type === 'exit') return fake.exit(end.code);
          if (end.type === 'hang') return;
          // A failed model (and a spawn failure drawn for a later turn, which cannot happen once it runs).
          endPrompt((id) => refuse(id, RequestError.internalError(undefined, 'the fake model failed')));
        };
        const goOn = () =>
          fake.sequence(
            [...rest, ...question].flatMap((chunks) => message(sessionId, chunks)),
            finish,
            group,
          );
        const { ask } = turn;
        if (ask === undefined) return fake.sequence(message(sessionId, first), goOn, group);

        const toolCallId = world.nextId('fake-call');
        const kind = ask.kind === 'command' ? 'execute' : 'edit';
        const rawInput = ask.kind === 'command' ? { command: ask.title } : { path: ask.title.replace(/^edit /, ''), content: 'fake content' };
        const toolCall = { toolCallId, title: ask.title, kind, status: 'pending', rawInput } as const;
        const answered = (outcome: unknown) => {
          const selected = isObject(outcome) && outcome.outcome === 'selected' ? outcome.optionId : undefined;
          if (isObject(outcome) && outcome.outcome === 'cancelled') {
            fake.did('cancelled');
            return fake.later(() => stop('cancelled'), group);
          }
          if (selected === 'once') {
            fake.did('approved');
            const status = (s: 'in_progress' | 'completed') => () => update(sessionId, { sessionUpdate: 'tool_call_update', toolCallId, status: s });
            return fake.sequence([status('in_progress'), status('completed')], goOn, group);
          }
          if (selected === 'reject') {
            fake.did('rejected');
            // As kilo: the tool call fails, and the turn ends without asking the model again.
            const failed = () => update(sessionId, { sessionUpdate: 'tool_call_update', toolCallId, status: 'failed' });
            return fake.sequence([failed], () => stop('end_turn'), group);
          }
          bad(`session/request_permission answered with ${JSON.stringify(outcome)}: expected the option once or reject, or cancelled`);
        };
        const askPermission = () => {
          const id = nextRequestId++;
          fake.did(`ask:${ask.kind}`);
          // Waiting before it asks: an answer may come within the call that sends the request.
          current.permission =
            end.type === 'exit' && end.duringAsk
              ? { id, answered: () => fake.did('answered') } // heard, but it is about to exit
              : { id, answered };
          send({ id, method: 'session/request_permission', params: { sessionId, toolCall, options: PERMISSION_OPTIONS } satisfies RequestPermissionRequest });
          if (end.type === 'exit' && end.duringAsk) fake.later(() => fake.exit(end.code), group);
        };
        fake.sequence([...message(sessionId, first), () => update(sessionId, { sessionUpdate: 'tool_call', ...toolCall })], askPermission, group);
      };

      const onPrompt = (id: AcpId, params: unknown) => {
        const sessionId = isObject(params) ? params.sessionId : undefined;
        if (typeof sessionId !== 'string' || !sessions.has(sessionId)) {
          bad(`session/prompt of a session this process does not have: ${JSON.stringify(sessionId)}`);
          return fake.later(() => refuse(id, RequestError.sessionNotFound(String(sessionId))));
        }
        if (prompt !== undefined) {
          bad('session/prompt while a prompt runs');
          return fake.later(() => refuse(id, RequestError.invalidRequest(undefined, 'a prompt is running')));
        }
        const turn = prompts === 0 ? context.first : context.turn(prompts);
        prompts++;
        fake.did(`turn:${turn.end.type}`);
        prompt = { id, sessionId, group: fake.group() };
        runTurn(prompt, turn);
      };

      const onRequest = (id: AcpId, method: string, params: unknown) => {
        if (method === 'initialize') {
          const result: InitializeResponse = { protocolVersion: PROTOCOL_VERSION, agentCapabilities: { loadSession: true }, authMethods: [] };
          return fake.later(() => respond(id, result));
        }
        if (method === 'session/new')
          return fake.later(() => {
            const sessionId = world.nextId('fake-acp-session');
            world.acpSessions.set(sessionId, []);
            sessions.add(sessionId);
            respond(id, { sessionId } satisfies NewSessionResponse);
          });
        if (method === 'session/load')
          return fake.later(() => {
            const sessionId = isObject(params) ? String(params.sessionId) : '';
            const history = world.acpSessions.get(sessionId);
            if (history === undefined) return refuse(id, RequestError.sessionNotFound(sessionId));
            sessions.add(sessionId);
            for (const text of history) update(sessionId, { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } });
            respond(id, {});
          });
        if (method === 'session/prompt') return onPrompt(id, params);
        bad(`request ${method}: not a method the agent offers`);
        fake.later(() => refuse(id, RequestError.methodNotFound(method)));
      };

      const onNotification = (method: string, params: unknown) => {
        if (method !== 'session/cancel') return bad(`notification ${method}: not one the agent reads`);
        const sessionId = isObject(params) ? params.sessionId : undefined;
        if (prompt === undefined || prompt.sessionId !== sessionId) return; // nothing runs there: a late cancel is harmless
        fake.did('cancelled');
        if (prompt.permission !== undefined) abandoned.add(prompt.permission.id);
        endPrompt((id) => fake.later(() => respond(id, { stopReason: 'cancelled' } satisfies PromptResponse)));
      };

      const onResponse = (id: AcpId, result: unknown, error: unknown) => {
        if (typeof id === 'number' && abandoned.delete(id)) return;
        const waiting = prompt?.permission;
        if (waiting === undefined || waiting.id !== id) return bad(`a response to no request of the agent's (id ${JSON.stringify(id)})`);
        prompt!.permission = undefined;
        if (error !== undefined) return bad(`session/request_permission answered with an error: ${JSON.stringify(error)}`);
        waiting.answered(isObject(result) ? result.outcome : undefined);
      };

      const reading = stdin$.subscribe({
        next: (line) => {
          let value: unknown;
          try {
            value = JSON.parse(line);
          } catch {
            return bad(`not JSON: ${line.slice(0, 200)}`);
          }
          const parsed = AcpEnvelope.safeParse(value);
          if (!parsed.success) return bad(`not a JSON-RPC 2.0 message: ${line.slice(0, 200)}`);
          const { id, method, params, result, error } = parsed.data;
          if (method !== undefined && id !== undefined) return onRequest(id, method, params);
          if (method !== undefined) return onNotification(method, params);
          if (id !== undefined) return onResponse(id, result, error);
          bad(`a JSON-RPC message with neither a method nor an id: ${line.slice(0, 200)}`);
        },
        complete: () => fake.later(() => fake.exit(0)), // as kilo: stdin closed, it exits
      });
      return () => {
        reading.unsubscribe();
        fake.close();
      };
    });
