import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { errorText } from '../../reducers/error-text.js';
import { checkColdKey, checkColdPrefix } from './cold-key.js';
import { ArchiveError, type ColdStore } from './cold-store.js';

/** Where {@link s3ColdStore} keeps objects, and the client it uses. */
export interface S3ColdStoreOptions {
  /** The bucket; it must exist. */
  readonly bucket: string;
  /**
   * Put before every key: `'runestream/'` keeps the objects under that folder of the bucket.
   * Empty, or a valid key ending with `/`. Default `''`.
   */
  readonly prefix?: string;
  /** A client to use (its owner destroys it). */
  readonly client?: S3Client;
  /**
   * Or the configuration of a client the store makes (and `close` destroys): region, endpoint,
   * credentials. Against an S3-compatible server that does not know recent checksums (s3rver),
   * add `requestChecksumCalculation: 'WHEN_REQUIRED'`, `responseChecksumValidation: 'WHEN_REQUIRED'`
   * and `forcePathStyle: true`.
   */
  readonly clientConfig?: S3ClientConfig;
  /** Keys per listing request (`MaxKeys`), 1..1000. Default 1000, S3's maximum. */
  readonly listPageSize?: number;
}

/** A {@link ColdStore} in an S3 bucket; `close` destroys the client it made (not one it was given). */
export interface S3ColdStore extends ColdStore {
  close(): Promise<void>;
}

type Sdk = typeof import('@aws-sdk/client-s3');

/**
 * A cold store in an S3 bucket (AWS S3, or any S3-compatible service) through
 * `@aws-sdk/client-s3`, which the application installs: it is loaded on the store's first call,
 * so nothing loads it before.
 *
 * 1. Keys are checked first ({@link checkColdKey}) exactly as the folder store checks them.
 * 2. `get` of a missing object resolves to `undefined` (S3's `NoSuchKey`); `list` follows
 *    continuation tokens until the listing ends; `delete` of a missing object succeeds.
 * 3. Any other failure (network, credentials, a missing bucket, an HTTP status) is an
 *    `ArchiveError` with code `cold_store_failed`, whose message names the operation, the key and
 *    the status, and whose cause is the SDK's error.
 *
 * @example
 * ```ts no-run: needs an S3 bucket and credentials
 * import { s3ColdStore } from 'runestream/s3';
 * const cold = s3ColdStore({ bucket: 'archives', prefix: 'runestream/', clientConfig: { region: 'eu-west-1' } });
 * ```
 */
export function s3ColdStore(options: S3ColdStoreOptions): S3ColdStore {
  const { bucket, prefix = '', client: given, clientConfig, listPageSize = 1000 } = options;
  if (typeof bucket !== 'string' || bucket === '') throw new TypeError('s3ColdStore: "bucket" is the name of an existing bucket');
  if (given !== undefined && clientConfig !== undefined) throw new TypeError('s3ColdStore: give "client" or "clientConfig", not both');
  if (!Number.isInteger(listPageSize) || listPageSize < 1 || listPageSize > 1000) throw new TypeError('s3ColdStore: "listPageSize" is an integer from 1 to 1000');
  if (prefix !== '') {
    if (!prefix.endsWith('/')) throw new TypeError('s3ColdStore: "prefix" is empty or ends with "/" (a folder of the bucket)');
    checkColdKey(prefix.slice(0, -1));
  }

  let loaded: Promise<{ sdk: Sdk; client: S3Client }> | undefined;
  const load = () =>
    (loaded ??= import('@aws-sdk/client-s3').then(
      (sdk) => ({ sdk, client: given ?? new sdk.S3Client(clientConfig ?? {}) }),
      (error: unknown) => {
        loaded = undefined;
        throw new ArchiveError('cold_store_failed', `s3ColdStore needs the package @aws-sdk/client-s3 (install it): ${errorText(error)}`, { cause: error });
      },
    ));

  const call = async <T>(what: string, run: (s3: { sdk: Sdk; client: S3Client }) => Promise<T>): Promise<T> => {
    const s3 = await load();
    try {
      return await run(s3);
    } catch (error) {
      const status = (error as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
      throw new ArchiveError(
        'cold_store_failed',
        `s3 cold store: ${what} in bucket "${bucket}" failed${status === undefined ? '' : ` (HTTP ${status})`}: ${errorText(error)}`,
        {
          cause: error,
        },
      );
    }
  };

  return {
    async put(key, body) {
      checkColdKey(key);
      await call(`put "${key}"`, ({ sdk, client }) => client.send(new sdk.PutObjectCommand({ Bucket: bucket, Key: prefix + key, Body: body })));
    },

    async get(key) {
      checkColdKey(key);
      return call(`get "${key}"`, async ({ sdk, client }) => {
        try {
          const answer = await client.send(new sdk.GetObjectCommand({ Bucket: bucket, Key: prefix + key }));
          return answer.Body === undefined ? new Uint8Array(0) : await answer.Body.transformToByteArray();
        } catch (error) {
          if (error instanceof sdk.NoSuchKey || (error as { name?: unknown } | null)?.name === 'NoSuchKey') return undefined;
          throw error;
        }
      });
    },

    async list(listPrefix) {
      checkColdPrefix(listPrefix);
      return call(`list "${listPrefix}"`, async ({ sdk, client }) => {
        const keys: string[] = [];
        let token: string | undefined;
        do {
          const page = await client.send(new sdk.ListObjectsV2Command({ Bucket: bucket, Prefix: prefix + listPrefix, ContinuationToken: token, MaxKeys: listPageSize }));
          for (const object of page.Contents ?? []) if (object.Key?.startsWith(prefix)) keys.push(object.Key.slice(prefix.length));
          token = page.IsTruncated ? page.NextContinuationToken : undefined;
        } while (token !== undefined);
        return keys.sort();
      });
    },

    async delete(key) {
      checkColdKey(key);
      await call(`delete "${key}"`, ({ sdk, client }) => client.send(new sdk.DeleteObjectCommand({ Bucket: bucket, Key: prefix + key })));
    },

    async close() {
      if (given !== undefined || loaded === undefined) return;
      const { client } = await loaded;
      client.destroy();
    },
  };
}
