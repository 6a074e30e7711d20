/**
 * Runs a connection's requests in arrival order when some step of them is asynchronous (an
 * `authorize` hook that returns a promise): each `check` result reaches its `then` only after
 * every earlier one has. While nothing is waiting, a synchronous check runs at once, with no
 * promise at all: the common case costs nothing.
 */
export class InOrder {
  private tail: Promise<void> | undefined;

  run<T>(check: () => T | Promise<T>, then: (value: T) => void): void {
    const step = (): Promise<void> | undefined => {
      const value = check();
      if (!(value instanceof Promise)) {
        then(value);
        return undefined;
      }
      return value.then(then);
    };
    const pending = this.tail === undefined ? step() : this.tail.then(step);
    if (pending === undefined) return;
    const tail: Promise<void> = pending.then(
      () => this.settle(tail),
      () => this.settle(tail),
    );
    this.tail = tail;
  }

  private settle(tail: Promise<void>): void {
    if (this.tail === tail) this.tail = undefined;
  }
}
