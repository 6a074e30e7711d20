import { Observable } from 'rxjs';
import type { CliProgram } from '../src/agents.js';
import { FakeProcess, type FakeRunContext } from './fake-process.js';

/** A ClineMessage as cline 2 prints it with `--json`. */
type ClineMessage = { ts: number; type: 'ask' | 'say'; ask?: string; say?: string; text?: string; partial?: boolean };

/**
 * A fake cline 2 in `--json` mode, as `ndjsonCliAdapter` runs it: its task comes on the command line
 * (`--json [-y] -- <prompt>`, or `-T <taskId> -- <text>` to continue a task), it reads no stdin,
 * and it prints one JSON line per message (test/fixtures/cli/cline-2.18.0 has the real ones):
 *
 * 1. `{"type":"task_started","taskId"}`; a `-T` run then prints the task's messages again (same
 *    `ts`: the adapter skips them as history), `ask:resume_task` and `say:user_feedback` (its text);
 *    a new task prints `say:task`. Then `say:api_req_started`.
 * 2. The turn (see `FakeTurn`): each message as `say:text` partial updates (one `ts`, the
 *    text so far), then whole; an ask is printed partial, then whole, and cline goes on (`-y`
 *    approves it) with a new `api_req_started`.
 * 3. The end: `say:completion_result` (sometimes followed by `ask:completion_result`) and exit 0;
 *    a question is `ask:followup` (`{"question","options"}`), after which it waits, as the real one
 *    does for an answer `--json` cannot give; a failed model is `ask:api_req_failed`, cline's
 *    `{"type":"error"}` line and exit 1; or an exit (during an ask: after an `ask:followup`), or silence.
 */
export const fakeCline =
  (context: FakeRunContext): CliProgram =>
  ({ options }) =>
    new Observable((subscriber) => {
      const fake = new FakeProcess(subscriber, context);
      const { world, first: turn } = context;
      const args = options.args ?? [];
      const text = args.includes('--') ? args[args.indexOf('--') + 1] : undefined;
      const resumed = args.includes('-T');
      const taskId = resumed ? args[args.indexOf('-T') + 1] : world.nextId('fake-task');
      if (!args.includes('--json') || text === undefined || taskId === undefined) {
        world.protocolError(context.record.pid, `cline was started with ${JSON.stringify(args)}: expected --json [-y] [-T <taskId>] -- <text>`);
        fake.later(() => fake.exit(2, 'usage: cline --json [-y] [-T <taskId>] -- <text>'));
        return () => fake.close();
      }
      const history = world.clineTasks.get(taskId) ?? [];
      world.clineTasks.set(taskId, history);

      /** Prints a message; a whole one is kept in the task's history. */
      const print = (message: ClineMessage): void => {
        fake.print(message);
        if (message.partial !== true) history.push(message);
      };
      const say = (name: string, body?: string) => () => print({ ts: world.nextTs(), type: 'say', say: name, ...(body === undefined ? {} : { text: body }) });
      const ask = (name: string, body?: string) => () => print({ ts: world.nextTs(), type: 'ask', ask: name, ...(body === undefined ? {} : { text: body }) });
      /** A message streamed: partial updates of one `ts` with the text so far, then the whole. */
      const streamed = (type: 'say' | 'ask', name: string, chunks: readonly string[]): (() => void)[] => {
        let ts = 0;
        const upTo = (n: number) => chunks.slice(0, n).join(' ');
        return [
          ...chunks.map((_, i) => () => {
            if (i === 0) ts = world.nextTs();
            print({ ts, type, [type]: name, text: upTo(i + 1), partial: true });
          }),
          () => print({ ts, type, [type]: name, text: upTo(chunks.length), partial: false }),
        ];
      };
      const question = ask('followup', JSON.stringify({ question: 'Which file should I change next?', options: [] }));

      const start = [
        () => fake.print({ type: 'task_started', taskId }),
        ...(resumed ? [() => history.slice().forEach((message) => fake.print(message)), ask('resume_task'), say('user_feedback', text)] : [say('task', text)]),
        say('api_req_started', JSON.stringify({ request: text })),
      ];
      const [firstMessage = [], ...rest] = turn.messages;
      const asked = turn.ask === undefined ? [] : [...streamed('ask', turn.ask.kind, [turn.ask.title]), () => fake.did(`ask:${turn.ask!.kind}`), say('api_req_started')];
      const work = [...streamed('say', 'text', firstMessage), ...asked, ...rest.flatMap((chunks) => streamed('say', 'text', chunks))];
      const last = turn.messages.at(-1)?.join(' ') ?? 'Done.';

      fake.did(`turn:${turn.end.type}`);
      const end = ((): (() => void)[] => {
        switch (turn.end.type) {
          case 'complete':
            return [
              say('completion_result', last),
              () => {
                if (world.random() < 0.5) ask('completion_result')(); // with -y cline 2.18 prints none; other modes do
              },
              () => fake.exit(0),
            ];
          case 'question':
            return [question, () => fake.did('question')]; // then it waits: --json cannot answer it
          case 'fail':
            return [
              ask('api_req_failed', 'The model server failed (HTTP 500).'),
              () => fake.print({ type: 'error', message: 'fake: 500 Internal Server Error' }),
              () => fake.exit(1, 'the model failed'),
            ];
          case 'exit': {
            const { code, duringAsk } = turn.end;
            return [...(duringAsk ? [question] : []), () => fake.exit(code)];
          }
          default:
            return []; // hang: silence, until the idle timeout ends it
        }
      })();
      fake.sequence([...start, ...work, ...end], () => {});
      return () => fake.close();
    });
