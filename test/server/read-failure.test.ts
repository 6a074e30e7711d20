import { describe, expect, it } from 'vitest';
import { readFailureOf } from '../../src/server/read-failure.js';
import { StoreError } from '../../src/streams/store.js';
import { StreamReadError } from '../../src/streams/stream-read-error.js';

// What a subscriber is told when a stream's read fails: damaged data keeps its own code, so a
// client can tell it from a server failure; only pruned runes mean "go on from a snapshot".
describe('readFailureOf', () => {
  it.each(['chain_broken', 'corrupt_file'] as const)('a store error %s is told with its code and message', (code) => {
    const error = new StoreError(code, `sqliteStore "x.db": stream "s": damaged (${code})`);
    expect(readFailureOf('s', error)).toEqual({ code, message: error.message });
  });

  it('any other store error is internal, naming the stream', () => {
    expect(readFailureOf('s', new StoreError('io_error', 'the disk failed'))).toEqual({ code: 'internal', message: 'stream "s": StoreError: the disk failed' });
  });

  it('pruned runes are no failure: the reader goes on from a snapshot', () => {
    expect(readFailureOf('s', new StreamReadError('runes_missing', 'pruned'))).toBeUndefined();
  });
});
