// An RxJS application that embeds the engine: a stream of request outcomes drives a circuit
// breaker kept in a SQLite log, the app reads the breaker's state as an Observable, and a
// second engine on the same file finds it where the first left it.
//
//   npm run example -- examples/rx-app.ts
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { distinctUntilChanged, firstValueFrom, from, lastValueFrom, map, toArray } from 'rxjs';
import { type CircuitBreakerState, createEngine, dispatchTo } from 'runestream';
import { sqliteStore } from 'runestream/sqlite';

const dir = mkdtempSync(join(tmpdir(), 'rx-app-'));
const file = join(dir, 'log.db');

// What the app observes: each call to a flaky service, as an event for its breaker.
const outcomes$ = from(['ok', 'HTTP 500', 'HTTP 502', 'HTTP 503', 'ok']).pipe(
  map((outcome) => (outcome === 'ok' ? { type: 'success' as const } : { type: 'failure' as const, error: outcome })),
);

const engine = createEngine({ store: sqliteStore(file) });
await engine.spawn('breaker/payments', 'circuit-breaker', { failureThreshold: 3, successThreshold: 2, openTimeoutMs: 30_000 });

// The breaker's state names as they change: the app reacts to OPEN by failing fast.
const seen: string[] = [];
const watching = engine
  .state$<CircuitBreakerState>('breaker/payments')
  .pipe(
    map((state) => state.value),
    distinctUntilChanged(),
  )
  .subscribe((value) => {
    seen.push(value);
    console.log(`payments breaker: ${value}`);
  });

// Every outcome dispatched in order; each result once its rune is durable (a refused event
// would be a result with its code, not an error).
const results = await lastValueFrom(outcomes$.pipe(dispatchTo(engine, 'breaker/payments'), toArray()));
console.log(results.map((result) => (result.accepted ? result.rune.kind : result.code)).join(', '));
watching.unsubscribe();
await engine.close();

// Another process (here: another engine) on the same log sees the breaker as it was left.
const again = createEngine({ store: sqliteStore(file) });
const state = await firstValueFrom(again.state$<CircuitBreakerState>('breaker/payments'));
console.log(`after a restart: ${state.value}, last error: ${state.lastError}`);
assert.deepEqual(seen, ['CLOSED', 'OPEN']);
await again.close();
rmSync(dir, { recursive: true, force: true });
// Logs:
// payments breaker: CLOSED
// payments breaker: OPEN
// success, failure, failure, failure, success
// after a restart: OPEN, last error: HTTP 503
