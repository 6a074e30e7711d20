import { describe, expect, it } from 'vitest';
import { ENGINE_CHANNELS, type Rune } from '../../../src/index.js';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { durableInstance } from '../../../src/streams/engine/instance.js';
import { Outlets } from '../../../src/streams/engine/outlets.js';
import { chatActor } from '../../../src/index.js';

const rune = (stream: string, seq: number): Rune => ({ stream, seq, machine: chatActor.id, kind: 'Ping', event: { type: 'Ping' }, at: seq });

describe('Outlets', () => {
  it("tells a rune to its stream's listeners, to every rune's subscribers and to the diagnostics channel; a state to its stream's", () => {
    const outlets = new Outlets();
    const heard: string[] = [];
    outlets.runes.add('a', { next: (r) => heard.push(`a ${r.seq}`), complete: () => heard.push('a done') });
    outlets.all.subscribe({ next: (r) => heard.push(`all ${r.stream}:${r.seq}`), complete: () => heard.push('all done') });
    const onChannel = (message: unknown) => heard.push(`channel ${(message as Rune).seq}`);
    subscribe(ENGINE_CHANNELS.rune, onChannel);
    try {
      outlets.rune(rune('a', 2));
      outlets.rune(rune('b', 7));
    } finally {
      unsubscribe(ENGINE_CHANNELS.rune, onChannel);
    }
    expect(outlets.watched('a')).toBe(false);
    const states: number[] = [];
    outlets.states.add('a', { next: (instance) => states.push(instance.durableSeq), complete: () => {} });
    expect(outlets.watched('a')).toBe(true);
    outlets.state('a', durableInstance('a', chatActor, chatActor.initial(), 3, 3, 0));
    outlets.complete();
    expect(heard).toEqual(['a 2', 'all a:2', 'channel 2', 'all b:7', 'channel 7', 'all done', 'a done']);
    expect(states).toEqual([3]);
  });
});
