import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** How long a worker may take to print its line (tsx start-up included) on a loaded machine. */
const SAFETY_MS = 20_000;

/**
 * Runs a worker script (`node --import tsx <script> ...args`), waits for the first line it prints,
 * kills it with SIGKILL there and resolves once it is dead. Rejects (after killing it) if it exits
 * before that line, or does not print it within 20 s.
 */
export function runAndKill(script: string, args: readonly string[]): Promise<{ line: string; signal: NodeJS.Signals | null; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let line: string | undefined;
  return new Promise((resolve, reject) => {
    const safety = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the worker did not print its line within ${SAFETY_MS} ms; stdout: ${stdout}; stderr: ${stderr}`));
    }, SAFETY_MS);
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (line === undefined && stdout.includes('\n')) {
        line = stdout.slice(0, stdout.indexOf('\n'));
        child.kill('SIGKILL'); // the worker is where the test wants it: it dies in the middle of it
      }
    });
    child.once('close', (code, signal) => {
      clearTimeout(safety);
      if (line !== undefined) resolve({ line, signal, stderr });
      else reject(new Error(`the worker exited (code ${code}, signal ${signal}); stdout: ${stdout}; stderr: ${stderr}`));
    });
  });
}
