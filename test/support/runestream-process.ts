import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** What `runestream serve` prints once it listens: the ws URL, its port, the http URL. */
export const LISTENING = /^runestream: listening on (ws:\/\/127\.0\.0\.1:(\d+)) and (http:\/\/127\.0\.0\.1:\d+) \(log: .*\)$/m;

const children: ChildProcess[] = [];
const dirs: string[] = [];

/** `runestream <args>` as a real process (node with the tsx loader: one process, so signals reach it directly). */
export function runestream(args: string[], env: Record<string, string> = {}) {
  const { RUNESTREAM_TOKEN: _, ...inherited } = process.env;
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: root,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const listeners: (() => void)[] = [];
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const listener of listeners) listener();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  children.push(child);
  return {
    child,
    exited,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    /** Waits for a line of stdout matching `pattern`; fails if the process exits first. */
    line: (pattern: RegExp): Promise<RegExpExecArray> =>
      new Promise((resolve, reject) => {
        const check = (): boolean => {
          const match = pattern.exec(stdout);
          if (match) resolve(match);
          return match !== null;
        };
        if (check()) return;
        listeners.push(check);
        void exited.then((code) => reject(new Error(`exited (${code}) before printing ${pattern}; stdout: ${stdout}; stderr: ${stderr}`)));
      }),
  };
}

/** A fresh SQLite file in its own temporary directory. */
export function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-cli-'));
  dirs.push(dir);
  return join(dir, 'log.db');
}

/** Kills every process `runestream` started and removes every `tempDb` directory: call it in afterEach. */
export function cleanUpProcesses(): void {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}
