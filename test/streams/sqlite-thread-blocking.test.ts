import { MessageChannel, Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { blockingAnswers } from '../../src/streams/sqlite-thread/blocking-answers.js';

/**
 * A thread that answers as `answerBlocking` does (post, move the signal, notify), but is slow
 * between moving the signal and notifying for its first answer: the notify then reaches the wait
 * for the second answer, 150 ms before that answer is posted.
 */
const SLOW_NOTIFIER = `
const { workerData } = require('node:worker_threads');
const { signal, port } = workerData;
const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
port.postMessage('first');
Atomics.add(signal, 0, 1);
pause(150);
Atomics.notify(signal, 0);
pause(150);
port.postMessage('second');
Atomics.add(signal, 0, 1);
Atomics.notify(signal, 0);
`;

describe('blockingAnswers', () => {
  it('takes each answer once, in order, even when the notify of the one before wakes its wait early', async () => {
    const signal = new Int32Array(new SharedArrayBuffer(4));
    const { port1, port2 } = new MessageChannel();
    const thread = new Worker(SLOW_NOTIFIER, { eval: true, workerData: { signal, port: port2 }, transferList: [port2], execArgv: [] });
    const next = blockingAnswers(signal, port1);
    // The first answer is in and its notify still to come: the first wait finds the signal moved and
    // does not sleep, so the second wait is the one that notify wakes, 150 ms before its answer.
    while (Atomics.load(signal, 0) === 0) Atomics.wait(signal, 0, 0, 1);
    expect([next(), next()]).toEqual(['first', 'second']);
    port1.close();
    await thread.terminate();
  });
});
