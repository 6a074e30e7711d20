import { describe, expect, it } from 'vitest';
import { chatActor, createEngine, machines, toolCall, turnEngine, type AnyMachine, type TableMachine } from '../../src/index.js';
import { runePayloadSchemas } from '../../src/reducers/rune-payloads.js';

const tableMachines = Object.values(machines as Record<string, AnyMachine>).filter((m): m is TableMachine<any, any, any> => 'table' in m);

describe('runePayloadSchemas: a schema per rune kind, from the table', () => {
  it('groups the events of a seed kind: tool.result is any outcome of a call, and nothing else', () => {
    const payloads = runePayloadSchemas(toolCall);
    const result = payloads['tool.result']!;
    for (const outcome of [{ type: 'success', output: 3 }, { type: 'execution_error', error: 'x' }, { type: 'cancelled' }, { type: 'approval_timeout' }]) {
      expect(result.safeParse(outcome).success, outcome.type).toBe(true);
    }
    expect(result.safeParse({ type: 'approved' }).success).toBe(false);
    expect(payloads['tool.denied']!.safeParse({ type: 'denied', reason: 'no' }).success).toBe(true);
    expect(result.safeParse({ type: 'success' }).success).toBe(false); // the payload's own fields are checked
  });

  it("the spawn kind carries the machine's input", () => {
    const spawn = runePayloadSchemas(toolCall)[toolCall.spawnKind]!;
    expect(spawn.safeParse({ type: 'spawn', input: { callId: 'c', toolName: 't', arguments: {} } }).success).toBe(true);
    expect(spawn.safeParse({ type: 'spawn', input: { callId: 'c' } }).success).toBe(false);
  });

  it.each(tableMachines.map((m) => [m.id, m] as const))('%s: every event type has a kind, and every kind a schema', (_id, machine) => {
    const payloads = runePayloadSchemas(machine);
    const kindsOfTypes = new Set(machine.table.map((row: { kind?: string; on: string }) => row.kind ?? row.on));
    for (const kind of kindsOfTypes) expect(payloads[kind], kind).toBeDefined();
    expect(Object.keys(payloads)).toContain(machine.spawnKind);
  });

  it('every rune an engine appends parses with the schema of its kind', async () => {
    const engine = createEngine();
    await engine.spawn('chat-1', chatActor);
    await engine.dispatch('chat-1', { type: 'ProcessInteraction', userId: '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21' });
    await engine.dispatch('chat-1', { type: 'Pause', reason: 'lunch' });
    await engine.spawn('turn-1', turnEngine);
    await engine.dispatch('turn-1', { type: 'start_turn', input: 'hi' });
    await engine.dispatch('turn-1', { type: 'assistant_delta', content: 'Hel' });
    await engine.dispatch('turn-1', { type: 'interrupt', reason: 'stop' });
    for (const [stream, machine] of [
      ['chat-1', chatActor as TableMachine<any, any, any>],
      ['turn-1', turnEngine as TableMachine<any, any, any>],
    ] as const) {
      const payloads = runePayloadSchemas(machine);
      const runes = await new Promise<{ kind: string; event: unknown }[]>((resolve) => {
        const seen: { kind: string; event: unknown }[] = [];
        engine.runes$(stream).subscribe((rune) => {
          seen.push(rune);
          if (seen.length === (stream === 'chat-1' ? 3 : 4)) resolve(seen);
        });
      });
      for (const rune of runes) expect(payloads[rune.kind]?.safeParse(rune.event).success, `${stream} ${rune.kind}`).toBe(true);
    }
    await engine.close();
  });
});
