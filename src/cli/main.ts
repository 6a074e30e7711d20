#!/usr/bin/env node
import { parseCommand, UsageError, type Command } from './args.js';
import { archivalCommand } from './archival-command.js';
import { helpCommandFor, helpOf } from './help.js';
import { serve } from './serve.js';
import { errorText } from '../reducers/error-text.js';
import { ServerConfigError } from '../server/config/server-config.js';

/** `runestream`: exit code 0 on a clean stop, 1 when serving fails, 2 for a bad command line. */
async function main(): Promise<void> {
  let command: Command;
  try {
    command = parseCommand(process.argv.slice(2), process.env);
  } catch (error) {
    if (error instanceof ServerConfigError) {
      console.error(`runestream: ${error.message.replaceAll('\n', '\nrunestream: ')}`);
      process.exit(2);
    }
    if (!(error instanceof UsageError)) throw error;
    console.error(`runestream: ${error.message}\nRun "${helpCommandFor(process.argv.slice(2))}" for usage.`);
    process.exit(2);
  }
  if (command.command === 'help') {
    console.log(helpOf(command.topic));
    return;
  }
  if (command.command !== 'serve') {
    process.exitCode = await archivalCommand(command, console);
    return;
  }
  // A signal while the server starts (the log open, MCP servers and CLIs starting) is held, not
  // the default death: once it serves, it stops cleanly; if it fails to start, it exits anyway.
  // One listener for the whole run, never removed: a signal libuv caught for a listener that is
  // removed before the event loop hands it over is lost, so the phase changes, not the listener.
  let signalled: NodeJS.Signals | undefined;
  let onSignal = (signal: NodeJS.Signals): void => {
    if (signalled !== undefined) process.exit(1); // a second signal: stop waiting
    signalled = signal;
  };
  const listener = (signal: NodeJS.Signals): void => onSignal(signal);
  process.on('SIGINT', listener);
  process.on('SIGTERM', listener);
  let serving;
  try {
    serving = await serve(command, console);
  } catch (error) {
    console.error(`runestream: ${error instanceof ServerConfigError ? error.message : errorText(error)}`);
    // A TypeError is a bad option (a non-loopback host without a token); a ServerConfigError a key variable not set.
    process.exit(error instanceof TypeError || error instanceof ServerConfigError ? 2 : 1);
  }
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) process.exit(1); // a second signal: stop waiting
    stopping = true;
    console.log(`runestream: ${signal}: closing`);
    serving.stop().then(
      () => {
        console.log('runestream: stopped, log flushed');
        process.exit(0);
      },
      (error: unknown) => {
        console.error(`runestream: failed to stop cleanly: ${errorText(error)}`);
        process.exit(1);
      },
    );
  };
  onSignal = stop;
  if (signalled !== undefined) stop(signalled);
}

main().catch((error: unknown) => {
  console.error('runestream:', error);
  process.exit(1);
});
