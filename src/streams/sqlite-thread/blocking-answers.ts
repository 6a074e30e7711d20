import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

/**
 * The thread's side of an answer waited for blocking: posts `message` on `port`, then moves
 * `signal` and wakes the waiter ({@link blockingAnswers}). Posted first: once the signal moved, the
 * answer is there to take.
 */
export function answerBlocking(signal: Int32Array, port: MessagePort, message: unknown): void {
  port.postMessage(message);
  Atomics.add(signal, 0, 1);
  Atomics.notify(signal, 0);
}

/**
 * The waiting side: a function that blocks until the next answer {@link answerBlocking} gives on
 * `port`'s other end and returns it, one answer per call, in order. It waits in a loop until the
 * signal has moved past the answers already taken: a notify comes after its move, so the notify of
 * an answer already taken can wake the wait for the next one before that answer is there.
 */
export function blockingAnswers(signal: Int32Array, port: MessagePort): () => unknown {
  let taken = 0;
  return () => {
    while (Atomics.load(signal, 0) === taken) Atomics.wait(signal, 0, taken);
    taken++;
    return receiveMessageOnPort(port)?.message;
  };
}
