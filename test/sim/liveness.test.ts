import { describe, expect, it } from 'vitest';
import type { LogView } from '../../sim/actions.js';
import { livenessOracle } from '../../sim/oracles/liveness.js';
import { findingsOf } from '../../sim/oracles/oracle.js';
import type { World } from '../../sim/world.js';

/**
 * The liveness oracle on a log's last states, as the end of a run leaves them: what waits on a
 * person, however indirectly, is not stuck; what works with nobody working on it is, named by its cause.
 */

/** A world whose streams are in these states (machine and state name), as the oracle reads them at the end. */
const worldOf = (states: Record<string, [machine: string, value: string]>): World => {
  const heads = Object.entries(states).map(([stream, [machine, value]], index) => ({ stream, machine, value, seq: 1, at: index }));
  return {
    streams: async () => heads,
    read: async (stream: string) => [{ stream, seq: 1, kind: 'last', at: 0 }],
    engine: { snapshot: async (stream: string) => (stream in states ? { state: { value: states[stream]?.[1] } } : undefined) },
  } as unknown as World;
};

const stuck = async (world: World): Promise<string[]> =>
  findingsOf(await livenessOracle().final?.(world, undefined as unknown as LogView)).map((finding) => finding.stream ?? finding.message);

// Seed 6501: a chat's interaction whose turn delegated, and the sub-agent's call waits for approval.
const chatWaitingOnApproval = {
  'chat/h3': ['conversation', 'active'],
  'chat/h3/actor/1': ['chat-actor', 'running'],
  'chat/h3/agent/assistant': ['agent-lifecycle', 'running_turn'],
  'chat/h3/agent/assistant/turn': ['turn-engine', 'tool_executing'],
  'chat/h3/agent/assistant/call/call_43_1': ['tool-call', 'executing'],
  'chat/h3/agent/assistant.call_43_1': ['agent-lifecycle', 'running_turn'],
  'chat/h3/agent/assistant.call_43_1/turn': ['turn-engine', 'tool_executing'],
  'chat/h3/agent/assistant.call_43_1/call/call_45_1': ['tool-call', 'awaiting_approval'],
} satisfies Record<string, [string, string]>;

describe('the liveness oracle', () => {
  it("counts a running chat actor whose interaction waits on a person (its chat's agent's call awaiting approval) as waiting", async () => {
    expect(await stuck(worldOf(chatWaitingOnApproval))).toEqual([]);
  });

  it("names the stuck work, not the chat actor waiting on it, when its chat's agent works with nobody working on it", async () => {
    const working = { ...chatWaitingOnApproval, 'chat/h3/agent/assistant.call_43_1/call/call_45_1': ['tool-call', 'executing'] } satisfies Record<string, [string, string]>;
    expect(await stuck(worldOf(working))).toEqual(['chat/h3/agent/assistant.call_43_1/call/call_45_1']);
  });

  it('judges a running chat actor with no work of its chat stuck', async () => {
    expect(
      await stuck(
        worldOf({ 'chat/h3': ['conversation', 'active'], 'chat/h3/actor/1': ['chat-actor', 'running'], 'chat/h4/agent/assistant/turn': ['turn-engine', 'streaming'] }),
      ),
    ).toEqual(['chat/h3/actor/1', 'chat/h4/agent/assistant/turn']);
  });
});
