import { Observable, type OperatorFunction } from 'rxjs';

/** Options of {@link splitLines}. */
export interface SplitLinesOptions {
  /**
   * The longest line kept whole, in UTF-16 code units: a longer one is cut there, its rest dropped
   * up to the next line break, and `onOverlong` told. Default 1,048,576 (1 Mi), so a process that
   * never prints a line break cannot make this buffer without bound.
   */
  readonly maxLineLength?: number;
  /** Told the length kept of each line cut at `maxLineLength`. */
  readonly onOverlong?: (kept: number) => void;
}

/** The default of {@link SplitLinesOptions.maxLineLength}. */
export const MAX_LINE_LENGTH = 1 << 20;

/**
 * Splits a byte or text stream (a child process's stdout) into lines without their `\n` or
 * `\r\n`: a line split across chunks, or a UTF-8 character split across them, arrives whole; a
 * last line without a break arrives when the source completes. Empty lines are dropped.
 *
 * @example
 * ```ts
 * import { from, toArray, firstValueFrom } from 'rxjs';
 * import { splitLines } from 'runestream';
 * console.log(await firstValueFrom(from(['{"a":', '1}\r\n{"b"', ':2}\nlast']).pipe(splitLines(), toArray())));
 * // Logs: [ '{"a":1}', '{"b":2}', 'last' ]
 * ```
 */
export function splitLines(options: SplitLinesOptions = {}): OperatorFunction<Uint8Array | string, string> {
  const { maxLineLength = MAX_LINE_LENGTH, onOverlong } = options;
  return (source) =>
    new Observable<string>((subscriber) => {
      const decoder = new TextDecoder('utf-8');
      let pending = '';
      /** Dropping the rest of a line that was cut. */
      let skipping = false;
      const emit = (line: string): void => {
        const text = line.endsWith('\r') ? line.slice(0, -1) : line;
        if (text.length > maxLineLength) {
          subscriber.next(text.slice(0, maxLineLength));
          onOverlong?.(maxLineLength);
        } else if (text.length > 0) subscriber.next(text);
      };
      const push = (text: string): void => {
        let start = 0;
        for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
          if (skipping) skipping = false;
          else emit(pending + text.slice(start, end));
          pending = '';
          start = end + 1;
        }
        if (skipping) return;
        pending += text.slice(start);
        if (pending.length > maxLineLength) {
          emit(pending);
          pending = '';
          skipping = true;
        }
      };
      return source.subscribe({
        next: (chunk) => push(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true })),
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          push(decoder.decode());
          if (!skipping) emit(pending);
          subscriber.complete();
        },
      });
    });
}
