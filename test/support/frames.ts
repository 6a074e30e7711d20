import { Subject, VirtualTimeScheduler, defer, from, of } from 'rxjs';
import { expect } from 'vitest';
import { machines, type Epic, type EpicCommand, type EpicContext, type Rune, type Snapshot, type StreamHead } from '../../src/index.js';
import type { AnyMachine } from '../../src/reducers/machine.js';
import { headMatches } from '../../src/streams/store.js';

/** A macrotask: by then every Promise an epic's step awaits (on a context that answers at once) has settled. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One stream of a {@link machineWorld}: its machine, state and runes. */
interface WorldStream {
  readonly machine: AnyMachine;
  state: unknown;
  readonly runes: Rune[];
}

/**
 * A log in memory played by the real machines, on a virtual clock: what an engine does for an
 * epic, by hand. `spawn` and `dispatch` apply an event with the stream's machine (a rejected event
 * fails the test) and return its rune; `run` carries out an epic's commands and returns their runes
 * (a rejected one is skipped, as the engine reports and drops it). `context` answers every read
 * at once from what is applied.
 */
export function machineWorld(scheduler = new VirtualTimeScheduler()) {
  const streams = new Map<string, WorldStream>();
  const append = (stream: string, entry: WorldStream, rune: Omit<Rune, 'stream' | 'seq' | 'machine' | 'at'>): Rune => {
    const full: Rune = { stream, seq: entry.runes.length + 1, machine: entry.machine.id, at: scheduler.now(), ...rune };
    entry.runes.push(full);
    return full;
  };
  const machineOf = (id: string): AnyMachine => {
    const machine = (machines as Record<string, AnyMachine>)[id];
    if (machine === undefined) throw new Error(`no machine ${id}`);
    return machine;
  };
  const spawn = (stream: string, machineId: string, input?: unknown): Rune => {
    expect(streams.has(stream), `${stream} spawned twice`).toBe(false);
    const machine = machineOf(machineId);
    const state = machine.initial(input);
    const entry: WorldStream = { machine, state, runes: [] };
    streams.set(stream, entry);
    return append(stream, entry, { kind: machine.spawnKind, event: { type: 'spawn', input }, ...valueOf(state, 'to') });
  };
  const step = (stream: string, event: Rune['event']): { rune?: Rune; rejected?: string } | undefined => {
    const entry = streams.get(stream);
    if (entry === undefined) return undefined;
    const result = entry.machine.step(entry.state, event);
    if (!result.accepted) return { rejected: result.reason };
    const from = valueOf(entry.state, 'from');
    entry.state = result.state;
    return {
      rune: append(stream, entry, { kind: result.kind, event, ...from, ...valueOf(result.state, 'to'), ...(result.payload === undefined ? {} : { payload: result.payload }) }),
    };
  };
  const dispatch = (stream: string, event: Rune['event']): Rune => {
    const result = step(stream, event);
    expect(result, `${stream}: ${JSON.stringify(event)} refused`).toHaveProperty('rune');
    return result!.rune!;
  };
  const run = (commands: readonly EpicCommand[]): Rune[] =>
    commands.flatMap((command) => {
      if ('spawn' in command) return streams.has(command.stream) ? [] : [spawn(command.stream, command.spawn, command.input)];
      const result = step(command.stream, command.event);
      return result?.rune === undefined ? [] : [result.rune];
    });
  const head = (stream: string, entry: WorldStream): StreamHead => {
    const last = entry.runes.at(-1)!;
    return { stream, machine: entry.machine.id, seq: last.seq, at: last.at, ...(last.to === undefined ? {} : { value: last.to }) };
  };
  const stateOf = <S>(stream: string): S | undefined => streams.get(stream)?.state as S | undefined;
  const context = (overrides: Partial<EpicContext> = {}): EpicContext => ({
    state: stateOf,
    snapshot: <S>(stream: string) =>
      defer(() => {
        const entry = streams.get(stream);
        return of(entry === undefined ? undefined : ({ stream, seq: entry.runes.length, state: entry.state } as Snapshot<S>));
      }),
    read: (stream, afterSeq = 0) => defer(() => from((streams.get(stream)?.runes ?? []).filter((rune) => rune.seq > afterSeq))),
    release: () => {},
    streams: (query = {}) => defer(() => from([...streams].map(([stream, entry]) => head(stream, entry)).filter((h) => headMatches(h, query)))),
    scheduler,
    ...overrides,
  });
  return { scheduler, spawn, dispatch, run, state: stateOf, value: (stream: string) => streams.get(stream)?.runes.at(-1)?.to, context };
}

/** The state name of a finite machine's state, as a rune's `from` or `to`. */
const valueOf = (state: unknown, key: 'from' | 'to'): Partial<Record<'from' | 'to', string>> =>
  typeof state === 'object' && state !== null && typeof (state as { value?: unknown }).value === 'string' ? { [key]: (state as { value: string }).value } : {};

/** A command with the virtual frame it was emitted at. */
export interface Frame {
  readonly frame: number;
  readonly command: EpicCommand;
}

/**
 * Plays an epic whose steps await Promises (which settle outside `TestScheduler.run`, so marbles
 * cannot hold them) on a virtual clock: runes are sent at the current frame, and each `send`
 * resolves with the commands emitted in response, once the timers due have run and the epic's
 * awaited steps have settled. `frames` keeps every command with its frame.
 */
export function playEpic(epic: Epic, context: EpicContext, scheduler: VirtualTimeScheduler) {
  const runes$ = new Subject<Rune>();
  const frames: Frame[] = [];
  let emitted = 0;
  const subscription = epic(runes$, context, undefined).subscribe((command) => frames.push({ frame: scheduler.now(), command }));
  /** The commands emitted since the last call, once the epic is quiet: every due timer run, every awaited step settled. */
  const drain = async (): Promise<EpicCommand[]> => {
    const now = scheduler.now();
    for (let quiet = 0; quiet < 2; ) {
      const before = frames.length;
      scheduler.maxFrames = now;
      scheduler.flush();
      await settle();
      quiet = frames.length === before && !scheduler.actions.some((action) => action.delay <= now) ? quiet + 1 : 0;
    }
    const fresh = frames.slice(emitted).map((f) => f.command);
    emitted = frames.length;
    return fresh;
  };
  return {
    frames,
    /** Sends runes at the current frame; resolves with the commands they led to. */
    send: (...runes: Rune[]): Promise<EpicCommand[]> => {
      for (const rune of runes) runes$.next(rune);
      return drain();
    },
    /** Unsubscribes the epic, as a process that dies: its effects and timers end with it. */
    stop: (): void => subscription.unsubscribe(),
  };
}

/**
 * The engine's part for an epic's own commands: all of them applied in `world`, then their runes
 * sent to the epic (a rejected one is dropped, as the engine reports it); resolves with what the
 * epic answered.
 */
export function applyAll(play: ReturnType<typeof playEpic>, world: ReturnType<typeof machineWorld>, commands: readonly EpicCommand[]): Promise<EpicCommand[]> {
  return play.send(...world.run(commands));
}
