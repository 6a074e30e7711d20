import { z } from 'zod';

const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name such as AWS_ACCESS_KEY_ID');

/** An S3-compatible bucket; its credentials come from the environment variables it names, never from the file. */
const S3Config = z.strictObject({
  bucket: z.string().min(3).max(63),
  /** The service's URL (an S3-compatible server); default: AWS S3 of `region`. */
  endpoint: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as http://127.0.0.1:9000' }).optional(),
  region: z.string().min(1).max(64).default('us-east-1'),
  /** Put before every key, ending with `/`: `'runestream/'`. Default: none. */
  prefix: z.string().max(512).optional(),
  /** Path-style URLs (most S3-compatible servers want them). Default: true with an `endpoint`. */
  forcePathStyle: z.boolean().optional(),
  /** The environment variables of the access key id and secret. Default: the SDK's own lookup (AWS_ACCESS_KEY_ID, ...). */
  accessKeyIdEnv: EnvName.optional(),
  secretAccessKeyEnv: EnvName.optional(),
});

/** How much of a stream's history the hot log keeps (see `RetentionRule`). */
const RetentionRuleConfig = z.strictObject({
  machine: z.string().min(1).max(128).optional(),
  prefix: z.string().min(1).max(1024).optional(),
  keep: z.union([z.literal('all'), z.literal('since-snapshot'), z.strictObject({ days: z.number().positive().max(36_500) })]),
});

/**
 * The `archival` key of the configuration file: where archives go (`cold`: a folder, relative to
 * the file's folder, or an S3 bucket), retention policies, and the retry backoff.
 *
 * ```json no-run
 * { "archival": { "cold": { "folder": "cold" }, "retention": [{ "machine": "tool-call", "keep": { "days": 30 } }] } }
 * ```
 */
export const ArchivalConfig = z.strictObject({
  cold: z.union([z.strictObject({ folder: z.string().min(1).max(4096) }), z.strictObject({ s3: S3Config })]),
  /** Retention policies, first match wins; default none (keep everything). */
  retention: z.array(RetentionRuleConfig).max(100).optional(),
  /** How often retention is enforced. Default 3,600,000 ms. */
  retentionEveryMs: z.number().int().positive().optional(),
  /** The first retry's wait after a failed write (doubling), and the longest. Defaults 1,000 and 300,000 ms. */
  retryBaseMs: z.number().int().positive().optional(),
  retryMaxMs: z.number().int().positive().optional(),
});
export type ArchivalConfig = z.infer<typeof ArchivalConfig>;
