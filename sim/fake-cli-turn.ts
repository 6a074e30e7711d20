import type { CliRun } from '../src/agents.js';

/** The two fake CLIs: cline's `--json` NDJSON, and an ACP agent such as kilo. */
export type FakeCliName = 'fake-ndjson' | 'fake-acp';

/** How a turn of a fake agent ends. */
export type FakeTurnEnd =
  /** The task is done: cline's `completion_result`, ACP's `end_turn`. */
  | { readonly type: 'complete' }
  /**
   * It asks the user a question: cline's `ask:followup`, after which it waits for an answer its
   * `--json` mode cannot take (so the session ends the process); an ACP agent ends its turn with
   * the question (`end_turn`), and the session's next `send_message` answers it.
   */
  | { readonly type: 'question' }
  /** The model failed: cline's `ask:api_req_failed` and `{"type":"error"}` line, then exit 1; an ACP agent answers the prompt with a JSON-RPC error. */
  | { readonly type: 'fail' }
  /**
   * The process exits mid-turn with `code` (non-zero: after a line of stderr); with `duringAsk`,
   * while an answer is awaited (cline: after an `ask:followup`; ACP: while its permission request is
   * pending, when the turn has an `ask`).
   */
  | { readonly type: 'exit'; readonly code: number; readonly duringAsk: boolean }
  /** It prints nothing more: the session's idle timeout ends it. */
  | { readonly type: 'hang' }
  /** Only as a run's first turn: the process does not start (`spawn_failed`). */
  | { readonly type: 'spawn_failed' };

/** What one turn of a fake agent does: the messages it streams, an approval it may ask for, and how it ends. */
export interface FakeTurn {
  /** Its messages, each as the chunks it streams (partial, then the whole message). */
  readonly messages: readonly (readonly string[])[];
  /**
   * A tool (an edit) or a command it asks approval for after its first message: ACP asks with
   * `session/request_permission` and goes on once answered (rejected: it ends the turn); cline
   * `-y` prints the ask and goes on (the session auto-approves it).
   */
  readonly ask?: { readonly kind: 'tool' | 'command'; readonly title: string };
  readonly end: FakeTurnEnd;
}

/** What a turn is chosen from: the fake's `random`, and which run and turn it is for. */
export interface FakeTurnRequest {
  readonly random: () => number;
  readonly cli: FakeCliName;
  readonly stream: string;
  readonly run: CliRun;
  /** 0 for a run's first turn (drawn when its process starts), then 1, 2, ... for each later prompt (ACP). */
  readonly index: number;
}

const WORDS = ['reading', 'the', 'tests', 'a', 'fix', 'in', 'src', 'now', 'passes', 'config', 'looks', 'fine', 'next', 'step', 'done', 'with'];
const FILES = ['src/index.ts', 'src/app.ts', 'README.md', 'test/app.test.ts'];
const COMMANDS = ['npm test', 'git status', 'ls src', 'npx tsc --noEmit'];

/** An integer in [0, n), from `random`. */
export const below = (random: () => number, n: number): number => Math.min(n - 1, Math.floor(random() * n));

/** One of `choices`, each as likely as its weight. */
function weighted<T>(random: () => number, choices: readonly (readonly [T, number])[]): T {
  const total = choices.reduce((sum, [, weight]) => sum + weight, 0);
  let at = random() * total;
  for (const [choice, weight] of choices) {
    if (at < weight) return choice;
    at -= weight;
  }
  return choices.at(-1)![0];
}

const chunk = (random: () => number): string => Array.from({ length: 1 + below(random, 4) }, () => WORDS[below(random, WORDS.length)]!).join(' ');

/** How turns end, each drawn as often as its weight (`spawn_failed` only in a run's first turn). */
const ENDS: readonly (readonly [(random: () => number) => FakeTurnEnd, number])[] = [
  [() => ({ type: 'complete' }), 40],
  [() => ({ type: 'question' }), 14],
  [() => ({ type: 'fail' }), 6],
  [(random) => ({ type: 'exit', code: 1 + below(random, 2), duringAsk: false }), 8],
  [() => ({ type: 'exit', code: 0, duringAsk: false }), 3],
  [(random) => ({ type: 'exit', code: below(random, 2), duringAsk: true }), 7],
  [() => ({ type: 'hang' }), 5],
];
const SPAWN_FAILED: readonly [() => FakeTurnEnd, number] = [() => ({ type: 'spawn_failed' }), 4];

/**
 * A turn drawn from `random`: one to three messages of one to three chunks each; an approval
 * asked in 2 turns of 5; it ends complete (40 %), with a question (14 %), a failed model (6 %),
 * an exit with an error (8 %), exit 0 mid-turn (3 %), an exit while an answer is awaited (7 %,
 * code 0 or 1), silence (5 %), or, in a run's first turn, a spawn failure (4 of 87).
 */
export function drawTurn({ random, index }: FakeTurnRequest): FakeTurn {
  const messages = Array.from({ length: 1 + below(random, 3) }, () => Array.from({ length: 1 + below(random, 3) }, () => chunk(random)));
  const ask: FakeTurn['ask'] =
    random() < 0.4
      ? random() < 0.5
        ? { kind: 'tool', title: `edit ${FILES[below(random, FILES.length)]!}` }
        : { kind: 'command', title: COMMANDS[below(random, COMMANDS.length)]! }
      : undefined;
  const end = weighted(random, index === 0 ? [...ENDS, SPAWN_FAILED] : ENDS)(random);
  return { messages, ...(ask === undefined ? {} : { ask }), end };
}
