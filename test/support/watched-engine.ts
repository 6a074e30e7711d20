import type { VirtualTimeScheduler } from 'rxjs';
import type { Engine, EngineError, Rune } from '../../src/index.js';
import { runVirtualTimeUntil } from './virtual-time.js';

/**
 * An engine on a virtual-time scheduler, watched: its errors, every rune, and the latest state of
 * each stream (watched from its first rune), read at once between steps of virtual time.
 */
export function watchEngine(engine: Engine, scheduler: VirtualTimeScheduler) {
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  const runes: Rune[] = [];
  const latest = new Map<string, unknown>();
  engine.runes$().subscribe((rune) => {
    runes.push(rune);
    if (!latest.has(rune.stream)) {
      latest.set(rune.stream, undefined);
      engine.state$(rune.stream).subscribe((state) => latest.set(rune.stream, state));
    }
  });
  /** Virtual time runs until `done` holds, the engine quiet. */
  const until = (done: () => boolean) => runVirtualTimeUntil(scheduler, () => runes.length, done);
  const state = <S>(stream: string): S | undefined => latest.get(stream) as S | undefined;
  return { errors, runes, until, state };
}
