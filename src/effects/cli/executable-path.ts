import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, resolve } from 'node:path';

/** Where an executable is, or why it cannot run (the errno code `spawn` would have given). */
export type ExecutablePath = { readonly path: string } | { readonly code: 'ENOENT' | 'EACCES' | 'ENOTDIR' };

/** Why `path` cannot be executed, or `undefined` when it can. */
function unusable(path: string): 'ENOENT' | 'EACCES' | 'ENOTDIR' | undefined {
  try {
    if (statSync(path).isDirectory()) return 'EACCES';
    accessSync(path, constants.X_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'EACCES' || code === 'ENOTDIR' ? code : 'ENOENT';
  }
}

/**
 * The absolute path of `command` as `execvp` finds it: a name with a slash relative to `cwd`, else
 * the first executable file of that name in `pathVariable`'s folders (an empty entry is `cwd`).
 * Not found: `ENOENT`, or `EACCES` when one was found but cannot be executed, as `execvp` says.
 * A command run through a wrapper (`unshare`) is looked up here, so that one that is not there
 * still fails as `spawn` does, rather than as the wrapper's exit code 127.
 */
export function executablePath(command: string, cwd: string, pathVariable: string | undefined): ExecutablePath {
  if (command.includes('/')) {
    const path = resolve(cwd, command);
    const code = unusable(path);
    return code === undefined ? { path } : { code };
  }
  let denied = false;
  for (const folder of (pathVariable ?? '').split(delimiter)) {
    const path = resolve(cwd, folder, command);
    const code = unusable(path);
    if (code === undefined) return { path };
    if (code === 'EACCES') denied = true;
  }
  return { code: denied ? 'EACCES' : 'ENOENT' };
}
