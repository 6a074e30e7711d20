import { Observable, combineLatest, defer, filter, map, merge, scan } from 'rxjs';
import { circuitBreaker } from '../../reducers/circuit-breaker/machine.js';
import type { Rune } from '../../reducers/rune.js';
import type { EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';
import { providerBreakerStream } from '../llm/provider-chain.js';

/** What a chain's breakers say together: whether every one is OPEN, and whether each OPEN one was opened by a `Retry-After`. */
export interface ChainOpenness {
  readonly allOpen: boolean;
  /** Every breaker OPEN, each for a provider's `Retry-After` (an HTTP 429 or 503): the chain is rate limited. */
  readonly rateLimited: boolean;
}

interface BreakerSeen {
  readonly seq: number;
  readonly open: boolean;
  readonly retryAfter: boolean;
}

/**
 * The openness of a provider chain's breakers (`provider/<name>` streams), now and on every change:
 * each breaker's stored state first (a provider without a breaker yet is closed), then its live
 * runes (`runes$`), the later of the two by seq. Emits only when the openness changes.
 */
export function chainOpenness$(providers: readonly string[], runes$: Observable<Rune>, context: Pick<EpicContext, 'snapshot'>): Observable<ChainOpenness> {
  const one = (provider: string): Observable<BreakerSeen> => {
    const stream = providerBreakerStream(provider);
    const stored$ = defer(() => context.snapshot(stream, circuitBreaker)).pipe(
      map((snapshot): BreakerSeen => ({ seq: snapshot?.seq ?? 0, open: snapshot?.state.value === 'OPEN', retryAfter: snapshot?.state.openForMs !== undefined })),
    );
    const live$ = runes$.pipe(
      filter((rune) => rune.stream === stream),
      ofMachine(circuitBreaker),
      map(
        (rune): BreakerSeen => ({
          seq: rune.seq,
          open: rune.to === 'OPEN',
          retryAfter: rune.to === 'OPEN' && (rune.event.type === 'failure' ? rune.event.retryAfterMs !== undefined : false),
        }),
      ),
    );
    // Live first, so no rune falls between the stored state and the live ones; the later seq wins.
    return merge(live$, stored$).pipe(
      scan((latest: BreakerSeen | undefined, seen) => (latest === undefined || seen.seq >= latest.seq ? seen : latest), undefined),
      filter((seen): seen is BreakerSeen => seen !== undefined),
    );
  };
  return combineLatest(providers.map(one)).pipe(
    map((all): ChainOpenness => {
      const allOpen = all.every((seen) => seen.open);
      return { allOpen, rateLimited: allOpen && all.every((seen) => seen.retryAfter) };
    }),
  );
}
