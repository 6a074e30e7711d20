import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { ScriptedReply } from './chat-completions-server.js';

/** The pinned cline 2.x of the dev dependencies. */
export const CLINE_BIN = join(dirname(fileURLToPath(import.meta.url)), '../../node_modules/.bin/cline');

/** The version of {@link CLINE_BIN}, printed, so the log says which cline a test spawned. */
export function clineVersion(): string {
  const version = execFileSync(CLINE_BIN, ['--version'], { env: { PATH: process.env.PATH, CLINE_NO_AUTO_UPDATE: '1', HOME: tmpdir() }, encoding: 'utf8' }).trim();
  console.log(`cline ${version}`);
  return version;
}

/** The scripted model's answers, in cline 2's format: one tool as XML in the text. */
export const clineAnswers = {
  writeFile: { text: '<write_to_file>\n<path>hello.txt</path>\n<content>\nhello from cline\n</content>\n</write_to_file>' },
  complete: { text: '<attempt_completion>\n<result>\nI wrote hello.txt.\n</result>\n</attempt_completion>' },
} satisfies Record<string, ScriptedReply>;

/** How a cline process is started. */
export interface ClineRun {
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** SIGTERM the process once it prints a line for which this is true. */
  readonly killWhen?: (line: string) => boolean;
  /** SIGKILL the process group after this long, whatever it does. Default 60 s. */
  readonly timeoutMs?: number;
}

/** What a cline process printed, and how it ended. */
export interface ClineResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** From its `task_started` line. */
  readonly taskId?: string;
}

/**
 * The environment of a cline process pointed at a scratch `home`, configured (`cline auth`) for
 * the OpenAI-compatible server at `baseURL` with model `m`: never the real home, no auto-update
 * (`CLINE_NO_AUTO_UPDATE=1`), telemetry off.
 */
export async function clineEnv(home: string, baseURL: string): Promise<NodeJS.ProcessEnv> {
  mkdirSync(home, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_DATA_HOME: join(home, '.local/share'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_STATE_HOME: join(home, '.local/state'),
    CLINE_NO_AUTO_UPDATE: '1',
  };
  const auth = await clineRun({ args: ['auth', '-p', 'openai', '-k', 'KEY', '-m', 'm', '-b', baseURL], env, cwd: home });
  if (auth.code !== 0) throw new Error(`cline auth exited ${auth.code ?? auth.signal}: ${auth.stderr}`);
  // Telemetry off, so cline does not try to reach its telemetry host.
  const state = join(home, '.cline/data/globalState.json');
  writeFileSync(state, JSON.stringify({ ...(JSON.parse(readFileSync(state, 'utf8')) as object), telemetrySetting: 'disabled' }));
  return env;
}

/**
 * Runs cline in its own process group, stdin closed, and collects its output. When it exits (or
 * times out) the whole group is SIGKILLed, so a command it started does not outlive it.
 */
export function clineRun(run: ClineRun): Promise<ClineResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(CLINE_BIN, run.args, { cwd: run.cwd, env: run.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    child.stdin.end();
    let stdout = '';
    let stderr = '';
    let pending = '';
    let taskId: string | undefined;
    const killGroup = (): void => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
    };
    const timer = setTimeout(killGroup, run.timeoutMs ?? 60_000);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      stdout += chunk;
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const started = /^\{"type":"task_started","taskId":"([^"]+)"\}$/.exec(line);
        if (started) taskId ??= started[1];
        if (run.killWhen?.(line)) child.kill('SIGTERM');
      }
    });
    child.stderr.on('data', (chunk: string) => (stderr += chunk));
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // A command it started may hold stdout open: its group goes when cline does.
    child.on('exit', killGroup);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code, signal, ...(taskId === undefined ? {} : { taskId }) });
    });
  });
}
