import { afterEach } from 'vitest';
import { VirtualTimeScheduler, filter, firstValueFrom, type Observable, type SchedulerLike } from 'rxjs';
import { WebSocket } from 'ws';
import { z } from 'zod';
import { defineMachine } from '../../src/reducers/table.js';
import type { Rune } from '../../src/reducers/rune.js';
import { createClient, type ClientOptions, type RunestreamClient } from '../../src/server/client/index.js';
import { startScriptedServer, type ScriptedPeer, type ScriptedServer } from '../support/scripted-server.js';

const CounterState = z.object({ value: z.literal('counting'), count: z.number() });
type CounterState = z.infer<typeof CounterState>;
const CounterEvent = z.discriminatedUnion('type', [z.object({ type: z.literal('add'), by: z.number() })]);
type CounterEvent = z.infer<typeof CounterEvent>;

/** A machine small enough to check folds by eye: `add {by}` adds to `count`. */
export const counter = defineMachine<CounterState, CounterEvent, { start?: number } | undefined>({
  id: 'counter',
  states: ['counting'],
  terminal: [],
  events: ['add'],
  schemas: { state: CounterState, event: CounterEvent, input: z.object({ start: z.number().optional() }).optional() },
  initial: (input) => ({ value: 'counting', count: input?.start ?? 0 }),
  table: [{ from: 'counting', on: 'add', assign: (s, e) => ({ count: s.count + e.by }) }],
});

/** A rune of the counter machine: seq 1 is the spawn, every later one adds `by`. */
export function counterRune(stream: string, seq: number, by = 1): Rune {
  const event = seq === 1 ? { type: 'spawn', input: { start: 0 } } : { type: 'add', by };
  return { stream, seq, machine: 'counter', kind: event.type === 'spawn' ? 'spawned' : 'add', event, at: seq };
}

/** A scheduler for the backoff timers: virtual time, and every delay it was asked for. */
export function recordingScheduler() {
  const virtual = new VirtualTimeScheduler();
  const delays: number[] = [];
  const scheduler: SchedulerLike = {
    now: () => virtual.now(),
    schedule: ((work: never, delay?: number, state?: unknown) => {
      delays.push(delay ?? 0);
      return virtual.schedule(work, delay ?? 0, state);
    }) as SchedulerLike['schedule'],
  };
  return {
    scheduler,
    /** Every delay scheduled so far, in ms. */
    delays,
    /** Runs every timer that is due, however far ahead. */
    flush: () => virtual.flush(),
    /** Timers scheduled and not run or cancelled. */
    get pending() {
      return virtual.actions.length;
    },
  };
}

/** The `ws` WebSocket, counting how many sockets the client created. */
export function countingWebSocket() {
  const counted = { created: 0, WebSocket: WebSocket as unknown as NonNullable<ClientOptions['WebSocket']> };
  counted.WebSocket = class extends WebSocket {
    constructor(url: string) {
      super(url);
      counted.created++;
    }
  } as unknown as NonNullable<ClientOptions['WebSocket']>;
  return counted;
}

/** The first value of `source` that passes `predicate`. */
export const valueWhere = <T>(source: Observable<T>, predicate: (value: T) => boolean): Promise<T> => firstValueFrom(source.pipe(filter(predicate)));

/** Every value of `source` so far, collected into an array (subscribes now). */
export function collect<T>(source: Observable<T>): { values: T[]; error?: unknown; completed: boolean } {
  const out: { values: T[]; error?: unknown; completed: boolean } = { values: [], completed: false };
  source.subscribe({ next: (v) => out.values.push(v), error: (e) => (out.error = e), complete: () => (out.completed = true) });
  return out;
}

/** A scripted server and a client of it on a virtual-time backoff scheduler with random = 0.5. */
export async function setup(options: Partial<ClientOptions> = {}): Promise<{
  server: ScriptedServer;
  client: RunestreamClient;
  time: ReturnType<typeof recordingScheduler>;
  sockets: ReturnType<typeof countingWebSocket>;
  teardown: () => Promise<void>;
}> {
  const server = await startScriptedServer();
  const time = recordingScheduler();
  const sockets = countingWebSocket();
  const client = createClient({
    url: server.url,
    WebSocket: sockets.WebSocket,
    scheduler: time.scheduler,
    random: () => 0.5,
    machines: { counter },
    ...options,
  });
  return {
    server,
    client,
    time,
    sockets,
    teardown: async () => {
      await client.close();
      await server.close();
    },
  };
}

/**
 * `setup` for the tests of one `describe`: each test's client and server are torn down after it.
 * Call it in the `describe` body.
 */
export function setupPerTest(): (options?: Partial<ClientOptions>) => ReturnType<typeof setup> {
  let teardown: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await teardown?.();
    teardown = undefined;
  });
  return async (options) => {
    const env = await setup(options);
    teardown = env.teardown;
    return env;
  };
}

/**
 * Drops the client's socket and refuses its handshakes (401), so it backs off `failures` times:
 * after each backoff (flushed here) it reconnects, is refused, and is RECONNECTING again.
 */
export async function refuseReconnects(env: Awaited<ReturnType<typeof setup>>, peer: ScriptedPeer, failures: number): Promise<void> {
  env.server.refuse = true;
  peer.drop();
  await valueWhere(env.client.connectionState$, (s) => s === 'RECONNECTING');
  for (let attempt = 2; attempt <= failures; attempt++) {
    env.time.flush();
    await valueWhere(env.client.connectionState$, (s) => s === 'RECONNECTING');
  }
}

/** Subscribes `stream` and answers the client's subscribe with a snapshot at `seq`. */
export async function answerSubscribe(peer: ScriptedPeer, stream: string, seq: number, state: unknown): Promise<void> {
  const message = await peer.next();
  if (message.op !== 'subscribe' || message.stream !== stream) throw new Error(`expected a subscribe of ${stream}, got ${JSON.stringify(message)}`);
  peer.send({ op: 'snapshot', stream, seq, state });
}
