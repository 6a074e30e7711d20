/**
 * A stand-in for cline `--json` in the cli-lines benchmark: prints N cline-shaped NDJSON lines as
 * fast as stdout takes them, then exits 0:
 *
 *     node print-cline-lines.mjs <N> [cline's own arguments, ignored]
 *
 * `task_started`, the `api_req_started` say, N partial `say:text` messages (each with its `ts` and
 * a short text), then the `completion_result` ask.
 */
const count = Number(process.argv[2]);
if (!Number.isSafeInteger(count) || count < 0) {
  process.stderr.write(`print-cline-lines: the first argument must be a line count, got ${String(process.argv[2])}\n`);
  process.exit(2);
}

const write = (text) => new Promise((resolve) => (process.stdout.write(text) ? resolve() : process.stdout.once('drain', resolve)));
const line = (message) => `${JSON.stringify(message)}\n`;
/** Lines written per stdout write: one write a line would measure this script's syscalls, not its reader. */
const CHUNK = 256;

const ts0 = Date.now();
await write(line({ type: 'task_started', taskId: 'bench-task' }));
await write(line({ ts: ts0, type: 'say', say: 'api_req_started', text: '{"request":"bench"}' }));
let chunk = '';
for (let i = 1; i <= count; i++) {
  chunk += line({ ts: ts0 + i, type: 'say', say: 'text', partial: true, text: `w${i} ` });
  if (i % CHUNK === 0) {
    await write(chunk);
    chunk = '';
  }
}
chunk += line({ ts: ts0 + count + 1, type: 'ask', ask: 'completion_result', partial: false, text: 'done' });
await write(chunk);
// No process.exit: it would drop what the pipe has not taken yet. Ending on its own, it flushes stdout and exits 0.
