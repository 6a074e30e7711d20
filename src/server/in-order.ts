/**
 * Runs a connection's requests in arrival order when some step of them is asynchronous (an
 * `authorize` hook that returns a promise): each `check` result reaches its `then` only after
 * every earlier one has. While nothing is waiting, a synchronous check runs at once, with no
 * promise at all: the common case costs nothing. After `cancel()`, nothing queued runs: not its
 * `check`, not its `then`.
 */
export class InOrder {
  private tail: Promise<void> | undefined;
  private cancelled = false;

  run<T>(check: () => T | Promise<T>, then: (value: T) => void): void {
    if (this.cancelled) return;
    const step = (): Promise<void> | undefined => {
      if (this.cancelled) return undefined;
      const value = check();
      if (!(value instanceof Promise)) {
        then(value);
        return undefined;
      }
      return value.then((answer) => {
        if (!this.cancelled) then(answer);
      });
    };
    const pending = this.tail === undefined ? step() : this.tail.then(step);
    if (pending === undefined) return;
    const tail: Promise<void> = pending.then(
      () => this.settle(tail),
      () => this.settle(tail),
    );
    this.tail = tail;
  }

  /** Drops every queued step, and every later one (the connection has left). */
  cancel(): void {
    this.cancelled = true;
  }

  private settle(tail: Promise<void>): void {
    if (this.tail === tail) this.tail = undefined;
  }
}
