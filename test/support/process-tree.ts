import { readdirSync, readFileSync } from 'node:fs';

/**
 * Every process below `root`, by the parent links in /proc (Linux): what a CLI started, listed
 * while it runs so a test can check after it ended that none of them is left.
 */
export function descendants(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The fields after the command (which may hold spaces and parentheses): state, ppid, ...
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // it ended meanwhile
    }
  }
  const found: number[] = [];
  const walk = (pid: number) => {
    for (const [child, parent] of parents) {
      if (parent !== pid) continue;
      found.push(child);
      walk(child);
    }
  };
  walk(root);
  return found;
}

/** Whether a process is still alive (a zombie, ended but not yet reaped, counts as ended). */
export function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * The live processes with `marker` as one of their arguments (Linux, from /proc): how a test finds
 * what a CLI started in a PID namespace, whose pids there are not this machine's.
 */
export function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(marker) && alive(Number(entry))) found.push(Number(entry));
    } catch {
      // it ended meanwhile
    }
  }
  return found;
}

/** A marker no other process's arguments hold, for {@link processesWith}. */
export const uniqueMarker = (what: string): string => `runestream-test-${what}-${process.pid}-${Math.random().toString(36).slice(2)}`;

/** SIGKILL to every live process with `marker` as an argument: a test's clean-up, whatever it asserted. */
export function killProcessesWith(marker: string): void {
  for (const pid of processesWith(marker)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}
