import { VirtualTimeScheduler, type Observable, type SchedulerLike } from 'rxjs';
import { expect } from 'vitest';
import { isSpawnCommand, type CircuitBreakerState, type Engine, type EpicCommand } from '../../../src/index.js';
import {
  chainCall$,
  scriptedModel,
  type ChainOutput,
  type ModelPart,
  type ModelRequest,
  type ProviderChain,
  type SpentCall,
  type ScriptedModel,
} from '../../../src/agents.js';

/** A request with one user message and one tool. */
export const request: ModelRequest = {
  system: 'You are terse.',
  messages: [{ role: 'user', content: 'Weather in Oslo?' }],
  tools: {
    weather: {
      description: 'The weather in a city',
      inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
};

/** Every value an Observable emits until it ends, and its error if it failed. */
export function collect<T>(source: Observable<T>): Promise<{ values: T[]; error?: unknown }> {
  return new Promise((resolve) => {
    const values: T[] = [];
    source.subscribe({
      next: (value) => values.push(value),
      error: (error: unknown) => resolve({ values, error }),
      complete: () => resolve({ values }),
    });
  });
}

/** Carries out one command of a chain on an engine, as `runEpics` would; an existing stream is no error. */
export async function execute(engine: Engine, command: EpicCommand): Promise<void> {
  const result = isSpawnCommand(command) ? await engine.spawn(command.stream, command.spawn, command.input) : await engine.dispatch(command.stream, command.event);
  if (!result.accepted && result.code !== 'stream_exists') throw new Error(`command refused: ${result.code}: ${result.reason}`);
}

/** What a chain call produced, once its commands are all carried out on the engine. */
export interface ChainRun {
  readonly parts: ModelPart[];
  /** Each empty answer the chain fell over from, as it came. */
  readonly spent: SpentCall[];
  /** Each command, in order, as `spawn <stream>` or `<stream> <event type>`. */
  readonly commands: string[];
  readonly error?: unknown;
}

/**
 * Runs `chainCall$` against an engine, carrying out its commands one after another, in the order
 * they come. (Not with `concatMap`: an error would overtake the commands still queued before it.)
 */
export function runChain(engine: Engine, chain: ProviderChain, scheduler: SchedulerLike, req: ModelRequest = request): Promise<ChainRun> {
  const parts: ModelPart[] = [];
  const spent: SpentCall[] = [];
  const commands: string[] = [];
  let done = Promise.resolve();
  const handle = async (output: ChainOutput): Promise<void> => {
    if (output.type === 'part') {
      parts.push(output.part);
      return;
    }
    if (output.type === 'spent') {
      spent.push(output);
      return;
    }
    const { command } = output;
    commands.push(isSpawnCommand(command) ? `spawn ${command.stream}` : `${command.stream} ${command.event.type}`);
    await execute(engine, command);
  };
  return new Promise((resolve, reject) => {
    chainCall$(chain, req, { snapshot: engine.snapshot, scheduler }).subscribe({
      next: (output) => void (done = done.then(() => handle(output))),
      error: (error: unknown) => void done.then(() => resolve({ parts, spent, commands, error }), reject),
      complete: () => void done.then(() => resolve({ parts, spent, commands }), reject),
    });
  });
}

/** A breaker's state in the engine. */
export async function breaker(engine: Engine, name: string): Promise<CircuitBreakerState | undefined> {
  return (await engine.snapshot<CircuitBreakerState>(`provider/${name}`))?.state;
}

/** A model that fails every call with `HTTP 500` (the error is its own, per call). */
export const failing = (modelId: string, calls = 10): ScriptedModel =>
  scriptedModel(
    Array.from({ length: calls }, () => ({ error: 'HTTP 500: upstream unavailable' })),
    { modelId },
  );

/** A model that answers `text` to every call. */
export const answering = (modelId: string, text: string): ScriptedModel => scriptedModel([{ text }], { modelId, whenExhausted: 'cycle' });

/** A virtual clock that only runs when told: `advanceTo` runs what is due up to a time, and no further. */
export class ManualClock extends VirtualTimeScheduler {
  constructor(start = 0) {
    super(undefined, start);
    this.frame = start;
  }

  /** Runs every action due at or before `time`; later ones stay scheduled. */
  advanceTo(time: number): void {
    this.maxFrames = time;
    this.flush();
    this.frame = Math.max(this.frame, time);
  }
}

/** Waits until the event loop has run pending I/O and promise callbacks (the SDK's stream pipeline). */
export { settle } from '../../support/virtual-time.js';

/** Asserts and narrows. */
export function defined<T>(value: T | undefined): T {
  expect(value).toBeDefined();
  return value as T;
}
