import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ColdStore, fsColdStore, readManifest, verifyArchive, writeArchive } from '../../../src/index.js';
import { type S3ColdStore, s3ColdStore } from '../../../src/s3.js';
import { archiveRunes, coldStoreContract } from '../../support/cold-store-contract.js';
import { flakyColdStore } from '../../support/flaky-cold-store.js';
import { type LocalS3, startLocalS3 } from '../../support/s3-server.js';

describe('fsColdStore', () => {
  let dir: string;
  let cold: ColdStore;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runestream-cold-'));
    cold = fsColdStore(join(dir, 'cold'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  coldStoreContract(() => cold);

  it('keeps every object inside its folder, and leaves no temporary file behind', async () => {
    await writeArchive(cold, { stream: '../../etc/passwd', machine: 'm', state: null, runes: archiveRunes('../../etc/passwd', 3), at: 1 });
    expect(readdirSync(dir)).toEqual(['cold']);
    expect(readdirSync(join(dir, 'cold', 'streams'))).toEqual(['%2E.%2F..%2Fetc%2Fpasswd']); // its `/` and leading `.` encoded: one folder, inside
    expect(readdirSync(join(dir, 'cold', 'streams', '%2E.%2F..%2Fetc%2Fpasswd')).filter((name) => name.startsWith('.'))).toEqual([]);
  });

  it('an I/O failure is cold_store_failed with its cause', async () => {
    const file = join(dir, 'a-file');
    await fsColdStore(dir).put('a-file', new Uint8Array([1]));
    const underAFile = fsColdStore(file); // its folder is a file: every write fails
    await expect(underAFile.put('x/y', new Uint8Array([1]))).rejects.toMatchObject({
      name: 'ArchiveError',
      code: 'cold_store_failed',
      cause: { code: expect.stringMatching(/ENOTDIR|EEXIST/) },
    });
  });

  it('a write that fails twice then succeeds: each failure is cold_store_failed, the retried archive is whole', async () => {
    const flaky = flakyColdStore(cold, 2);
    const options = { stream: 's', machine: 'm', state: { n: 25 }, runes: archiveRunes('s', 25), at: 7, maxSegmentRunes: 10 };
    let attempts = 0;
    let manifest;
    for (;;) {
      attempts++;
      try {
        manifest = await writeArchive(flaky, options);
        break;
      } catch (error) {
        expect(error).toMatchObject({ name: 'ArchiveError', code: 'cold_store_failed', message: expect.stringContaining('connection reset') });
        expect(await readManifest(cold, 's')).toBeUndefined(); // the manifest is written last: no half archive is visible
      }
    }
    expect(attempts).toBe(3);
    expect(flaky.failed).toBe(2);
    expect(await readManifest(cold, 's')).toEqual(manifest);
    expect(await verifyArchive(cold, manifest)).toMatchObject({ segments: 3, runes: 25 });
  });
});

describe('s3ColdStore against a local S3-compatible server', () => {
  let s3: LocalS3;
  let cold: S3ColdStore;
  let run = 0;
  beforeAll(async () => {
    s3 = await startLocalS3();
  });
  afterAll(() => s3?.close());
  beforeEach(() => {
    // A folder of the bucket per test: each test starts from an empty store; pages of 7 keys exercise continuation.
    cold = s3ColdStore({ bucket: s3.bucket, prefix: `run-${++run}/`, clientConfig: s3.clientConfig, listPageSize: 7 });
  });
  afterEach(() => cold.close());

  coldStoreContract(() => cold);

  it('lists past one page of keys', async () => {
    for (let i = 0; i < 23; i++) await cold.put(`k/${String(i).padStart(2, '0')}`, new Uint8Array([i]));
    expect(await cold.list('k/')).toEqual(Array.from({ length: 23 }, (_, i) => `k/${String(i).padStart(2, '0')}`));
  });

  it('a missing bucket is cold_store_failed naming the bucket and the HTTP status', async () => {
    const missing = s3ColdStore({ bucket: 'no-such-bucket', clientConfig: s3.clientConfig });
    await expect(missing.put('a', new Uint8Array([1]))).rejects.toMatchObject({
      name: 'ArchiveError',
      code: 'cold_store_failed',
      message: expect.stringMatching(/put "a" in bucket "no-such-bucket" failed \(HTTP 404\)/),
    });
    await missing.close();
  });

  it('checks its options', () => {
    expect(() => s3ColdStore({ bucket: '' })).toThrow(/"bucket"/);
    expect(() => s3ColdStore({ bucket: 'b', prefix: 'no-slash' })).toThrow(/"prefix"/);
    expect(() => s3ColdStore({ bucket: 'b', prefix: '../' })).toThrow(/invalid|refused/);
    expect(() => s3ColdStore({ bucket: 'b', listPageSize: 0 })).toThrow(/"listPageSize"/);
  });
});
