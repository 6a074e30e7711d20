import { shortened } from '../../reducers/shortened.js';

/** The label value every value past a label's cap is counted under. */
export const OTHER_LABEL_VALUE = 'other';

/** The default cap on the distinct values of one label: 200. */
export const DEFAULT_MAX_LABEL_VALUES = 200;

/** The default cap on the length of one label value: 128 characters. */
export const DEFAULT_MAX_LABEL_LENGTH = 128;

/**
 * Keeps a metric's label values bounded, in number and in length:
 *
 * 1. A value longer than `maxLength` characters is cut to `maxLength`: its start, `…`, and 8 hex
 *    digits of a hash of the whole value (see `shortened`), so two long names stay two series.
 * 2. The first `max` distinct values of a label are kept as they are, every later one becomes
 *    {@link OTHER_LABEL_VALUE}.
 *
 * Tool, provider and model names come from configuration, so they are few and short; the caps
 * hold however many (and however long) a misconfiguration, a model or a client invents, so a
 * scrape never grows without bound: at most `max` x `maxLength` characters of values per label.
 */
export function boundedLabel(max: number, maxLength = DEFAULT_MAX_LABEL_LENGTH): (value: string) => string {
  const seen = new Set<string>();
  return (given) => {
    const value = shortened(given, maxLength);
    if (seen.has(value)) return value;
    if (seen.size >= max) return OTHER_LABEL_VALUE;
    seen.add(value);
    return value;
  };
}
