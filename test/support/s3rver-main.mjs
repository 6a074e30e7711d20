// Runs s3rver in its own process (test/support/s3-server.ts starts it): on 127.0.0.1, port 0,
// objects under argv[2], one bucket argv[3]; prints {"port":N} once it listens, stops on SIGTERM,
// or when its stdin closes (the test process that started it is gone).
// Its process runs with --openssl-legacy-provider: s3rver ciphers listing continuation tokens with
// DES, which OpenSSL 3 offers only there.
import S3rver from 's3rver';

const [directory, bucket] = process.argv.slice(2);
const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
const { port } = await server.run();
process.stdout.write(`${JSON.stringify({ port })}\n`);
const stop = () => server.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.stdin.on('end', stop).resume();
