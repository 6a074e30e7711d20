import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { S3ClientConfig } from '@aws-sdk/client-s3';

/** A local S3-compatible server (s3rver) on 127.0.0.1, its objects in a temporary folder. */
export interface LocalS3 {
  /** The bucket it was started with. */
  readonly bucket: string;
  /** A client configuration for it (path-style, fixed credentials, checksums only when required). */
  readonly clientConfig: S3ClientConfig;
  /** Stops the server and removes its folder. */
  close(): Promise<void>;
}

const main = fileURLToPath(new URL('./s3rver-main.mjs', import.meta.url));

/**
 * Starts s3rver in a child process on 127.0.0.1, port 0, with one bucket (see s3rver-main.mjs).
 * Recent AWS SDKs send and check CRC checksums s3rver does not know, hence
 * `requestChecksumCalculation` and `responseChecksumValidation: 'WHEN_REQUIRED'`.
 */
export async function startLocalS3(bucket = 'cold'): Promise<LocalS3> {
  const directory = mkdtempSync(join(tmpdir(), 'runestream-s3rver-'));
  const child: ChildProcess = spawn(process.execPath, ['--openssl-legacy-provider', main, directory, bucket], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await Promise.race([lines.next(), exited.then(([code]) => ({ value: undefined, done: true, code }))]);
  if (first.done || first.value === undefined) {
    rmSync(directory, { recursive: true, force: true });
    throw new Error('s3rver did not start (see its output above)');
  }
  const { port } = JSON.parse(first.value) as { port: number };
  return {
    bucket,
    clientConfig: {
      endpoint: `http://127.0.0.1:${port}`,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
