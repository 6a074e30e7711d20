import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Subscription, type Observable, type SchedulerLike } from 'rxjs';
import { agentEpics } from '../src/effects/agent/agent-epics.js';
import { reactAgentEpics } from '../src/effects/agent/react-agent-epics.js';
import { autonomyEpics } from '../src/effects/autonomy/autonomy-epics.js';
import { chatActorLifecycle } from '../src/effects/chat-actor-lifecycle.js';
import { chatTalk } from '../src/effects/chat-talk.js';
import { agentCliSessions } from '../src/effects/cli/agent-cli-sessions.js';
import type { ProviderChain } from '../src/effects/llm/provider-chain.js';
import type { AnyMachine } from '../src/reducers/machine.js';
import { SPAWN_EVENT_TYPE, type Rune } from '../src/reducers/rune.js';
import type { RuneOrigin } from '../src/reducers/rune-origin.js';
import { createEngine, type DispatchResult, type Engine } from '../src/streams/engine.js';
import { epicName, type Epic } from '../src/streams/epic.js';
import { sqliteStore } from '../src/streams/sqlite-store.js';
import { threadedSqliteStore } from '../src/streams/sqlite-thread/client.js';
import { StoreError, type RuneStore, type StreamHead } from '../src/streams/store.js';
import { SimClock } from './clock.js';
import { createFakeCli, type FakeCli } from './fake-cli.js';
import { FakeLlm } from './fake-llm.js';
import { fakeTools, type FakeTools } from './fake-tools.js';
import { Random } from './random.js';

/** The settings a seed draws for its world: the limits and timeouts the oracles reason with. */
export interface WorldSettings {
  readonly approvalTimeoutMs: number;
  readonly conversationModelCalls: number;
  readonly parallelism: number;
  readonly autoStart: boolean;
  readonly callTimeoutMs: number;
  readonly blockedTimeoutMs: number;
  readonly staleAfterMs: number;
  readonly inactivityTimeoutMs: number;
  /** How long a turn's text deltas are held into one rune: 0 (a rune per delta) to windows longer than the model's pauses, so crashes land inside them. */
  readonly deltaFlushMs: number;
}

/** The identity the simulated client acts as: its runes' origin. */
export const SIM_CLIENT: RuneOrigin = Object.freeze({ by: 'client', identity: 'sim' });

/** The largest timeout a seed's world runs with: liveness is judged this long (twice, plus a minute) after the last client action. */
export const largestTimeout = (settings: WorldSettings): number =>
  Math.max(settings.approvalTimeoutMs, settings.callTimeoutMs, settings.blockedTimeoutMs, settings.staleAfterMs, settings.inactivityTimeoutMs, 60_000);

/** Defects a test plants in a world, to show an oracle catches them. */
export interface PlantedDefects {
  /** Wraps each process's store (one that loses runes, ...). */
  readonly store?: (store: RuneStore) => RuneStore;
  /** Epics that run beside the system's (one that spends outside every budget, ...). */
  readonly epics?: (world: World) => readonly Epic[];
  /** Wraps what a client watching a stream hears (a feed that skips a rune, ...). */
  readonly feed?: (runes$: Observable<Rune>) => Observable<Rune>;
}

/**
 * A client watching one stream as a browser does (`runes$(stream, afterSeq)`: its stored runes,
 * then the live ones): what it heard, and how its feed ended.
 */
export interface Watch {
  readonly stream: string;
  readonly afterSeq: number;
  /** The process it watched in (1, 2, ...). */
  readonly process: number;
  readonly runes: Rune[];
  /** `complete` when its engine closed; an error is a failure (a crash must not break a client's feed). */
  ended?: 'complete' | { readonly error: unknown };
  /** How many of `runes` the watch oracle has checked. */
  checked: number;
}

/** At most this many watches are kept: older ones are stopped, as clients come and go. */
const MAX_WATCHES = 6;

/** A store whose process can die: after `kill`, every write is refused as a dead process's would be. */
function killable(store: RuneStore): RuneStore & { kill(): void } {
  let dead = false;
  const refuse = (): never => {
    throw new StoreError('closed', 'the process died');
  };
  return {
    ...store,
    append: (runes, options) => (dead ? Promise.reject(new StoreError('closed', 'the process died')) : store.append(runes, options)),
    ...(store.appendSync === undefined ? {} : { appendSync: (rune, options) => (dead ? refuse() : store.appendSync!(rune, options)) }),
    saveSnapshot: (snapshot) => (dead ? Promise.reject(new StoreError('closed', 'the process died')) : store.saveSnapshot(snapshot)),
    head: (stream) => store.head(stream),
    heads: (query) => store.heads(query),
    read: (stream, afterSeq, limit) => store.read(stream, afterSeq, limit),
    readEvents: (stream, afterSeq, limit) => store.readEvents(stream, afterSeq, limit),
    latestSnapshot: (stream) => store.latestSnapshot(stream),
    prune: (stream, throughSeq) => store.prune(stream, throughSeq),
    close: () => store.close(),
    kill: () => {
      dead = true;
    },
  };
}

/**
 * The seed systems together in one process, on a real SQLite file, under virtual time: chat
 * actors talking to agents, conversations of several agents with delegation, tools with approvals,
 * budgets, autonomy plans, ReAct agents, provider chains with breakers. Everything outside the
 * system (the model API, the tools' side effects) keeps its own books for the oracles.
 */
export class World {
  readonly random: Random;
  readonly clock: SimClock;
  readonly llm: FakeLlm;
  readonly tools: FakeTools;
  /** The agent CLIs (cline's NDJSON, an ACP agent), run in this process. */
  readonly cli: FakeCli;
  readonly settings: WorldSettings;
  readonly file: string;
  readonly #dir: string;
  readonly #ids: Random;
  /** Every rune this run saw published, in order, across processes: each was acknowledged. */
  readonly log: Rune[] = [];
  readonly #listeners = new Set<(rune: Rune) => void>();
  #engine!: Engine;
  #store!: ReturnType<typeof killable>;
  #subscription = new Subscription();
  /** How many processes have run: 1, then one more per crash. */
  processes = 0;
  /** The clients watching streams (see {@link Watch}), newest last. */
  readonly watches: Watch[] = [];
  readonly #watching = new Map<Watch, Subscription>();
  /** Draws which streams are watched, apart from `random`: watching changes none of a seed's other draws. */
  readonly #watchRandom: Random;
  /** Draws which processes keep the file in a thread of their own, apart from `random` too. */
  readonly #threadRandom: Random;
  /** Where each process kept the file, in process order: its event loop's thread, or a thread of its own. */
  readonly storeThreads: ('event loop' | 'own thread')[] = [];
  /** What the simulated client tried, by stream: the event types it dispatched (`spawn` for a spawn); each of its runes says it came from the client. */
  readonly clientTried = new Map<string, Set<string>>();
  /** The runes the client's dispatches and spawns were answered with (`stream#seq`). */
  readonly clientRunes = new Set<string>();
  /** The names of the epics every process runs, as their runes' origins name them. */
  epicNames: ReadonlySet<string> = new Set();

  constructor(
    readonly seed: number,
    readonly planted: PlantedDefects = {},
  ) {
    this.random = new Random(seed);
    this.#watchRandom = new Random(seed ^ 0x5eed);
    this.#threadRandom = new Random(seed ^ 0x7ead);
    this.#threadRandom.next(); // xoroshiro's first draw from a small seed is near 1 for every seed: not a coin
    const llmRandom = this.random.fork();
    const toolRandom = this.random.fork();
    this.#ids = this.random.fork();
    this.clock = new SimClock(() => this.log.length + this.llm.parts + this.tools.activity() + this.cli.stats().runs.length);
    this.llm = new FakeLlm({ random: llmRandom, clock: this.clock });
    this.tools = fakeTools(toolRandom, this.clock);
    const cliRandom = this.random.fork();
    // The CLIs' clock is whichever process's scheduler runs now: a crash kills their runs, and the
    // next process's runs wait on its clock.
    const clock = this.clock;
    const scheduler: SchedulerLike = {
      now: () => clock.scheduler.now(),
      schedule: (...args: Parameters<SchedulerLike['schedule']>) => clock.scheduler.schedule(...(args as [any, number?, any?])),
    };
    this.cli = createFakeCli({ random: () => cliRandom.next(), scheduler });
    const r = this.random;
    this.settings = {
      approvalTimeoutMs: r.pick([30_000, 120_000, 600_000]),
      conversationModelCalls: r.int(3, 12),
      parallelism: r.pick([1, 1, 2]),
      autoStart: r.chance(0.6),
      callTimeoutMs: r.pick([30_000, 60_000]),
      blockedTimeoutMs: r.pick([120_000, 600_000]),
      staleAfterMs: 600_000,
      inactivityTimeoutMs: 600_000,
      // Drawn apart from the seed's sequence, so adding it left every seed's actions as they were.
      deltaFlushMs: new Random(~seed).pick([0, 50, 50, 400, 2_000]),
    };
    this.#dir = mkdtempSync(join(tmpdir(), `runestream-sim-${seed}-`));
    this.file = join(this.#dir, 'sim.db');
  }

  get engine(): Engine {
    return this.#engine;
  }

  /** The simulated client: the engine's spawn and dispatch as the client identity {@link SIM_CLIENT}, what it tried and was answered recorded. */
  readonly client: Pick<Engine, 'snapshot' | 'spawn' | 'dispatch'> = {
    snapshot: (stream) => this.#engine.snapshot(stream),
    spawn: async (stream: string, machine: string | AnyMachine, input?: unknown): Promise<DispatchResult> => {
      this.#tried(stream, SPAWN_EVENT_TYPE);
      return this.#answered(await this.#engine.spawn(stream, machine, input, { origin: SIM_CLIENT }));
    },
    dispatch: async (stream: string, event: unknown): Promise<DispatchResult> => {
      const type = typeof event === 'object' && event !== null ? (event as { type?: unknown }).type : undefined;
      if (typeof type === 'string') this.#tried(stream, type);
      return this.#answered(await this.#engine.dispatch(stream, event, { origin: SIM_CLIENT }));
    },
  };
  #tried(stream: string, type: string): void {
    let types = this.clientTried.get(stream);
    if (types === undefined) this.clientTried.set(stream, (types = new Set()));
    types.add(type);
  }
  #answered(result: DispatchResult): DispatchResult {
    if (result.accepted) this.clientRunes.add(`${result.rune.stream}#${result.rune.seq}`);
    return result;
  }

  /** Told each rune as it is published. */
  onRune(listener: (rune: Rune) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #epics(): Epic[] {
    const { settings } = this;
    const claimId = (): string => `claim-${this.#ids.hex(12)}`;
    const chain: ProviderChain = {
      providers: ['p1', 'p2'].map((name) => ({ name, model: this.llm.model(name), breaker: { failureThreshold: 2, successThreshold: 1, openTimeoutMs: 30_000 } })),
      callTimeoutMs: settings.callTimeoutMs,
    };
    const { tools } = this.tools;
    return [
      chatActorLifecycle({ staleAfterMs: settings.staleAfterMs, inactivityTimeoutMs: settings.inactivityTimeoutMs }),
      chatTalk(),
      ...agentEpics({
        model: chain,
        tools,
        agents: { lead: { description: 'leads' }, helper: { description: 'helps' }, writer: { description: 'writes' } },
        conversationBudget: { modelCalls: settings.conversationModelCalls },
        approvalTimeoutMs: settings.approvalTimeoutMs,
        deltaFlushMs: settings.deltaFlushMs,
        claimId,
      }),
      ...reactAgentEpics({ model: chain, tools, breakers: false, claimId, budgets: { conversationBudget: { modelCalls: settings.conversationModelCalls } } }),
      ...autonomyEpics({
        planner: chain,
        critic: chain,
        roles: { writer: { description: 'writes' }, helper: { description: 'helps' } },
        parallelism: settings.parallelism,
        autoStart: settings.autoStart,
        blockedTimeoutMs: settings.blockedTimeoutMs,
      }),
      agentCliSessions({ clis: this.cli.clis, spawnProcess: this.cli.spawnProcess }),
      ...(this.planted.epics?.(this) ?? []),
    ];
  }

  /** Starts a process: a store on the file and an engine with every epic, on a fresh scheduler. */
  start(): void {
    this.processes++;
    const scheduler = this.processes === 1 ? this.clock.scheduler : this.clock.restart();
    // Half the processes keep the file in a thread of their own, as `runestream serve` does; its
    // answers are waited for blocking, so they come at the same point of every run of a seed.
    const ownThread = this.#threadRandom.chance(0.5);
    this.storeThreads.push(ownThread ? 'own thread' : 'event loop');
    const store = ownThread ? threadedSqliteStore(this.file, {}, 'blocking') : sqliteStore(this.file);
    this.#store = killable(this.planted.store?.(store) ?? store);
    const epics = this.#epics();
    this.epicNames = new Set(epics.map((epic, index) => epicName(epic as Epic<never>, index)));
    this.#engine = createEngine({ store: this.#store, scheduler, epics });
    this.#subscription = this.#engine.runes$().subscribe((rune) => {
      this.log.push(rune);
      for (const listener of this.#listeners) listener(rune);
    });
    // A client follows a stream through this process's life, from part of its stored history.
    this.#watchSome();
  }

  /**
   * A client starts watching a stream the log has, from a random point of its history: its
   * stored runes are replayed, then the live ones follow.
   */
  #watchSome(): void {
    const streams = [...new Set(this.log.map((rune) => rune.stream))];
    if (streams.length === 0) return;
    const stream = this.#watchRandom.pick(streams);
    let head = 0;
    for (const rune of this.log) if (rune.stream === stream && rune.seq > head) head = rune.seq;
    const watch: Watch = { stream, afterSeq: this.#watchRandom.int(0, head), process: this.processes, runes: [], checked: 0 };
    this.watches.push(watch);
    const feed$ = this.#engine.runes$(stream, { afterSeq: watch.afterSeq });
    this.#watching.set(
      watch,
      (this.planted.feed?.(feed$) ?? feed$).subscribe({
        next: (rune) => watch.runes.push(rune),
        error: (error: unknown) => (watch.ended = { error }),
        complete: () => (watch.ended ??= 'complete'),
      }),
    );
    while (this.#watching.size > MAX_WATCHES) {
      const [oldest, subscription] = this.#watching.entries().next().value!;
      subscription.unsubscribe();
      this.#watching.delete(oldest);
    }
  }

  /** The process dies: nothing more is written, its effects stop, its timers are dropped. */
  async crash(): Promise<void> {
    this.#store.kill();
    this.#subscription.unsubscribe();
    const closed = this.#engine.close().catch(() => undefined);
    // Clients that start watching as the process dies, and once it has: their feeds end, without an error.
    this.#watchSome();
    await closed;
    this.#watchSome();
  }

  /** Every stream in the file, with its machine. */
  async streams(): Promise<StreamHead[]> {
    const out: StreamHead[] = [];
    for await (const head of this.#store.heads()) out.push(head);
    return out;
  }

  /** Every rune of a stream, from the file. */
  read(stream: string): Promise<Rune[]> {
    return this.#store.read(stream);
  }

  async close(): Promise<void> {
    for (const subscription of this.#watching.values()) subscription.unsubscribe();
    this.#subscription.unsubscribe();
    await this.#engine.close().catch(() => undefined);
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
