/** The test-only Prometheus text parser: it ships no types of its own. */
declare module 'parse-prometheus-text-format' {
  /** One series: a value with its labels, or a histogram's or summary's parts (all numbers as strings). */
  export interface PrometheusSample {
    readonly labels?: Readonly<Record<string, string>>;
    readonly value?: string;
    readonly buckets?: Readonly<Record<string, string>>;
    readonly count?: string;
    readonly sum?: string;
  }
  /** One metric family: its name, help, type (uppercase: COUNTER, GAUGE, HISTOGRAM, ...) and series. */
  export interface PrometheusFamily {
    readonly name: string;
    readonly help: string;
    readonly type: string;
    readonly metrics: readonly PrometheusSample[];
  }
  export default function parsePrometheusTextFormat(text: string): PrometheusFamily[];
}
