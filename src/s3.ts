/**
 * runestream/s3: a cold store in an S3 bucket (AWS S3, or any S3-compatible service), for
 * archives. It loads `@aws-sdk/client-s3`, which the application installs, on its first call;
 * the rest of cold storage (the interface, the folder store, the archive format) is the root's.
 */
export { s3ColdStore, type S3ColdStore, type S3ColdStoreOptions } from './streams/archive/s3-cold-store.js';
