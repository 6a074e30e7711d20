import { execFile } from 'node:child_process';
import { executablePath } from './executable-path.js';

/**
 * How the processes an agent CLI starts are made to end with it:
 * - `pid_namespace` (Linux): the CLI runs in a PID namespace of its own (util-linux `unshare`), so
 *   every process it starts, in whatever process group or session, ends with it: when the CLI
 *   exits, when it is ended, and when the server process dies (SIGKILL included);
 * - `process_group` (elsewhere, or where `unshare` cannot make one): its process group only, so a
 *   process it starts in a group or session of its own (kilo's commands) may outlive it. `reason`
 *   says why.
 */
export type CliContainment =
  | {
      readonly kind: 'pid_namespace';
      /** The `unshare` executable and its arguments before the command. */
      readonly unshare: string;
      readonly args: readonly string[];
    }
  | { readonly kind: 'process_group'; readonly reason: string };

/** `unshare`'s options tried in turn: as root; else in a user namespace of its own as the same user (util-linux 2.38), or as its root. */
const USER_OPTIONS: readonly (readonly string[])[] = [[], ['--user', '--map-current-user'], ['--user', '--map-root-user']];
/** A PID namespace whose first process is forked (`--fork`) and gets SIGKILL when `unshare` dies (`--kill-child`). */
const NAMESPACE_OPTIONS = ['--pid', '--fork', '--kill-child'];
/**
 * The namespace's first process, its init: `sh` running the CLI as its child and exiting with its
 * code. Not the CLI itself: the init of a PID namespace ignores every signal it has no handler for
 * (SIGTERM too), so a CLI there would not end on SIGTERM. When the init exits, the kernel kills
 * every other process of the namespace. The CLI gets the server's stdin, stdout and stderr; the
 * init's own stderr is /dev/null, so it never adds its "Terminated" to the CLI's.
 */
const INIT_SCRIPT = 'exec 3>&2 2>/dev/null; (exec "$@" 2>&3 3>&-); exit $?';
/** How long the check may take before it counts as failed. */
const CHECK_TIMEOUT_MS = 10_000;

let detected: Promise<CliContainment> | undefined;

/**
 * How this server process contains its agent CLIs (see {@link CliContainment}), checked once, on
 * first use: on Linux, whether `unshare` runs a command in a PID namespace of its own here (the
 * namespace needs root, else a user namespace, which some systems forbid).
 */
export function cliContainment(): Promise<CliContainment> {
  detected ??= detect();
  return detected;
}

async function detect(): Promise<CliContainment> {
  if (process.platform !== 'linux') return { kind: 'process_group', reason: `PID namespaces are Linux's (this is ${process.platform})` };
  const unshare = executablePath('unshare', '/', process.env.PATH);
  const sh = executablePath('sh', '/', process.env.PATH);
  if (!('path' in unshare)) return { kind: 'process_group', reason: 'no unshare (util-linux) on PATH' };
  if (!('path' in sh)) return { kind: 'process_group', reason: 'no sh on PATH' };
  const failures: string[] = [];
  for (const options of USER_OPTIONS) {
    const args = [...options, ...NAMESPACE_OPTIONS, '--', sh.path, '-c', INIT_SCRIPT, 'runestream-cli'];
    const failure = await runs(unshare.path, [...args, sh.path, '-c', 'exit 0']);
    if (failure === undefined) return { kind: 'pid_namespace', unshare: unshare.path, args };
    failures.push(`unshare ${[...options, ...NAMESPACE_OPTIONS].join(' ')}: ${failure}`);
  }
  return { kind: 'process_group', reason: failures.join('; ') };
}

/** Runs `file` with `args`: `undefined` when it exited 0, else why not. */
const runs = (file: string, args: readonly string[]): Promise<string | undefined> =>
  new Promise((resolve) => {
    execFile(file, args, { timeout: CHECK_TIMEOUT_MS, cwd: '/' }, (error, _stdout, stderr) => {
      resolve(error === null ? undefined : stderr.trim() || error.message);
    });
  });

/** The command and arguments that run `path` with `args` as `containment` says. */
export function containedCommand(containment: CliContainment, path: string, args: readonly string[]): { readonly file: string; readonly args: readonly string[] } {
  return containment.kind === 'pid_namespace' ? { file: containment.unshare, args: [...containment.args, path, ...args] } : { file: path, args };
}
