import { isAbsolute, resolve } from 'node:path';
import type { ArchivalOptions } from '../../effects/archival/archival-epic.js';
import type { ColdStore } from '../../streams/archive/cold-store.js';
import { fsColdStore } from '../../streams/archive/fs-cold-store.js';
import { s3ColdStore } from '../../streams/archive/s3-cold-store.js';
import type { ArchivalConfig } from './archival-config.js';
import { ServerConfigError } from './server-config.js';

/** The cold store and the archival epic's settings a configuration's `archival` key makes. */
export interface ConfiguredArchival {
  readonly cold: ColdStore;
  readonly settings: Omit<ArchivalOptions, 'store' | 'cold'>;
  /** Releases the cold store's client (S3). */
  close(): Promise<void>;
}

/** The `archival` key made real: a folder is relative to `configDir`; S3 credentials come from `env`. */
export function configuredArchival(
  archival: ArchivalConfig,
  options: { readonly configDir: string; readonly source: string; readonly env: NodeJS.ProcessEnv },
): ConfiguredArchival {
  const { retention, retentionEveryMs, retryBaseMs, retryMaxMs } = archival;
  const settings = {
    ...(retention === undefined ? {} : { retention }),
    ...(retentionEveryMs === undefined ? {} : { retentionEveryMs }),
    ...(retryBaseMs === undefined ? {} : { retryBaseMs }),
    ...(retryMaxMs === undefined ? {} : { retryMaxMs }),
  };
  if ('folder' in archival.cold) {
    const { folder } = archival.cold;
    return { cold: fsColdStore(isAbsolute(folder) ? folder : resolve(options.configDir, folder)), settings, close: async () => {} };
  }
  const s3 = archival.cold.s3;
  const secret = (name: string | undefined, key: string): string | undefined => {
    if (name === undefined) return undefined;
    const value = options.env[name];
    if (!value) throw new ServerConfigError(options.source, [{ path: `archival.cold.s3.${key}`, message: `the environment variable ${name} is not set` }]);
    return value;
  };
  const accessKeyId = secret(s3.accessKeyIdEnv, 'accessKeyIdEnv');
  const secretAccessKey = secret(s3.secretAccessKeyEnv, 'secretAccessKeyEnv');
  const cold = s3ColdStore({
    bucket: s3.bucket,
    ...(s3.prefix === undefined ? {} : { prefix: s3.prefix }),
    clientConfig: {
      region: s3.region,
      ...(s3.endpoint === undefined ? {} : { endpoint: s3.endpoint }),
      forcePathStyle: s3.forcePathStyle ?? s3.endpoint !== undefined,
      ...(accessKeyId !== undefined && secretAccessKey !== undefined ? { credentials: { accessKeyId, secretAccessKey } } : {}),
      // Checksums only where the API requires them: S3-compatible servers do not all know the newer ones.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    },
  });
  return { cold, settings, close: () => cold.close() };
}
