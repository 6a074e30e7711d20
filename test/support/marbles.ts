import { TestScheduler } from 'rxjs/testing';
import { expect } from 'vitest';

/** The helpers of `TestScheduler.run`, with the scheduler itself. */
export interface Marbles {
  readonly scheduler: TestScheduler;
  hot: TestScheduler['createHotObservable'];
  cold: TestScheduler['createColdObservable'];
  expectObservable: TestScheduler['expectObservable'];
  expectSubscriptions: TestScheduler['expectSubscriptions'];
}

/** Runs the diagrams (frames compared with `toStrictEqual`); what `body` returns is checked once they have played (what a model was asked, say). */
export function marbleTest(body: (m: Marbles) => void | (() => void)): void {
  const scheduler = new TestScheduler((actual, expected) => expect(actual).toStrictEqual(expected));
  const after = scheduler.run((helpers) => body({ scheduler, ...helpers }));
  after?.();
}
