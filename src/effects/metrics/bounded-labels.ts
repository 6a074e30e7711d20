/** The label value every value past a label's cap is counted under. */
export const OTHER_LABEL_VALUE = 'other';

/** The default cap on the distinct values of one label: 200. */
export const DEFAULT_MAX_LABEL_VALUES = 200;

/**
 * Keeps a metric's label values bounded: the first `max` distinct values of a label are kept as
 * they are, every later one becomes {@link OTHER_LABEL_VALUE}. Tool, provider and model names come
 * from configuration, so they are few; the cap holds however many a misconfiguration or a client
 * invents, so a scrape never grows without bound.
 */
export function boundedLabel(max: number): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= max) return OTHER_LABEL_VALUE;
    seen.add(value);
    return value;
  };
}
