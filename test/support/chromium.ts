import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/**
 * Debian's chromium: `.ci/run` installs it. On a developer's machine without it the browser tests
 * are skipped, saying why; in CI (`CI=true`) they run all the same and fail, so a missing browser
 * never passes for a green run.
 */
export const CHROMIUM = '/usr/bin/chromium';

/** Whether the browser tests run here: `describe.skipIf(!hasChromium(where))`; warns when they do not. */
export function hasChromium(where: string): boolean {
  const has = existsSync(CHROMIUM) || process.env.CI === 'true';
  if (!has) console.warn(`${where}: skipped, ${CHROMIUM} is missing (install Debian's chromium package to run them)`);
  return has;
}

/** A headless Debian chromium; the flags keep it off the network this machine does not have. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
