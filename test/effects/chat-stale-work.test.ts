import type { LanguageModelV4, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { VirtualTimeScheduler, type SchedulerLike } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, chatTalk, defineTool, scriptedModel, sendChatMessage, type ScriptStep } from '../../src/agents.js';
import { agentStreams, chatActorLifecycle, createEngine, memoryStore, type Engine, type Rune } from '../../src/index.js';
import { runVirtualTimeUntil } from '../support/virtual-time.js';

/**
 * Issue 28 (c): the stale check of a running chat actor counts the work of its interaction (its
 * chat's turn and tool calls), and a call waiting for a person is not silence. The default
 * `staleAfterMs` (10 minutes) throughout.
 */

const USER = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const MINUTE = 60_000;
const chat = agentStreams('chat/c1', 'assistant');

/** A model whose every text delta comes `everyMs` of virtual time after what it streamed before: a slow provider. */
function paced(model: LanguageModelV4, scheduler: SchedulerLike, everyMs: number): LanguageModelV4 {
  const later = (): Promise<void> => new Promise((resolve) => scheduler.schedule(() => resolve(), everyMs));
  return {
    ...model,
    doStream: async (call) => {
      const result = await model.doStream(call);
      const stream = result.stream.pipeThrough(
        new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
          transform: async (part, controller) => {
            if (part.type === 'text-delta') await later();
            controller.enqueue(part);
          },
        }),
      );
      return { ...result, stream };
    },
  };
}

/** A tool that runs, saying nothing, until it is cancelled. */
const silent = defineTool({
  name: 'silent',
  description: 'Works quietly.',
  inputSchema: z.object({}),
  timeoutMs: Infinity,
  execute: (_input, { signal }) => new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
});

/** A tool that needs a person's approval. */
const deploy = defineTool({ name: 'deploy', description: 'Deploys.', inputSchema: z.object({}), needsApproval: true, execute: () => 'deployed' });

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

function chatEngine(script: readonly ScriptStep[], everyMs: number) {
  const scheduler = new VirtualTimeScheduler(undefined, Number.POSITIVE_INFINITY);
  const model = paced(scriptedModel(script), scheduler, everyMs);
  const engine = createEngine({ store: memoryStore(), scheduler, epics: [chatActorLifecycle(), chatTalk(), ...agentEpics({ model, tools: [deploy, silent] })] });
  engines.push(engine);
  const runes: Rune[] = [];
  engine.runes$().subscribe((rune) => runes.push(rune));
  return { engine, scheduler, runes };
}

const kinds = (runes: readonly Rune[], stream: string): string[] => runes.filter((rune) => rune.stream === stream).map((rune) => rune.kind);

describe('chatActorLifecycle: a chat at work is not stale', () => {
  it('a turn that streams deltas for 25 minutes, one a minute, is not paused, and the interaction completes', async () => {
    const text = Array.from({ length: 24 }, (_, i) => `word${i} `);
    const { engine, scheduler, runes } = chatEngine([{ text }], MINUTE);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'a long answer, please' });
    const done = await runVirtualTimeUntil(
      scheduler,
      () => runes.length,
      () => runes.some((rune) => rune.stream === sent.actor && rune.to !== 'running' && rune.from === 'running'),
    );
    expect(done).toBe(true);
    expect(kinds(runes, sent.actor)).toEqual(['spawned', 'ProcessInteraction', 'InteractionComplete']);
    expect(scheduler.now()).toBeGreaterThan(20 * MINUTE);
    expect(kinds(runes, chat.turn)).toContain('turn.completed');
    expect(kinds(runes, chat.turn)).not.toContain('turn.interrupted');
  });

  it('an approval pending for 9.5 of the 10 minutes, after a minute of streaming, is approved and the interaction completes', async () => {
    // The first answer streams for a minute, then asks to deploy; the second answers at once.
    const { engine, scheduler, runes } = chatEngine(
      [{ text: ['Let', ' me', ' deploy', ' it', ' now.'], toolCalls: [{ toolName: 'deploy', input: {} }] }, { text: 'Deployed.' }],
      12_000,
    );
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'deploy it' });
    const waiting = (): Rune | undefined => runes.find((rune) => rune.to === 'awaiting_approval');
    expect(
      await runVirtualTimeUntil(
        scheduler,
        () => runes.length,
        () => waiting() !== undefined,
      ),
    ).toBe(true);
    const askedAt = waiting()!.at;
    expect(askedAt).toBeGreaterThanOrEqual(MINUTE);

    // Nobody answers for 9.5 minutes: the actor has been running for more than 10.
    scheduler.maxFrames = askedAt + 9.5 * MINUTE;
    scheduler.flush();
    expect(
      await runVirtualTimeUntil(
        scheduler,
        () => runes.length,
        () => false,
        0,
      ),
    ).toBe(false);
    expect(kinds(runes, sent.actor)).toEqual(['spawned', 'ProcessInteraction']);

    const call = waiting()!.stream;
    expect(await engine.dispatch(call, { type: 'approved', approver: 'ann' })).toMatchObject({ accepted: true });
    scheduler.maxFrames = Number.POSITIVE_INFINITY;
    const completed = await runVirtualTimeUntil(
      scheduler,
      () => runes.length,
      () => runes.some((rune) => rune.stream === sent.actor && rune.kind === 'InteractionComplete'),
    );
    expect(completed).toBe(true);
    expect(kinds(runes, sent.actor)).toEqual(['spawned', 'ProcessInteraction', 'InteractionComplete']);
    expect(runes.find((rune) => rune.stream === sent.actor && rune.kind === 'InteractionComplete')?.event).toEqual({ type: 'InteractionComplete', success: true });
    expect(runes.filter((rune) => rune.stream === call).map((rune) => rune.to)).toContain('completed_result');
  });

  it('a truly silent interaction (its tool runs on saying nothing) is still paused as stale, 10 minutes after its last rune', async () => {
    const { engine, scheduler, runes } = chatEngine([{ toolCalls: [{ toolName: 'silent', input: {} }] }], 1000);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'work quietly' });
    const paused = await runVirtualTimeUntil(
      scheduler,
      () => runes.length,
      () => runes.some((rune) => rune.stream === sent.actor && rune.kind === 'Pause'),
      // The tool never ends: stop once virtual time is well past the window.
      5000,
    );
    expect(paused).toBe(true);
    const pause = runes.find((rune) => rune.stream === sent.actor && rune.kind === 'Pause')!;
    expect(pause.event).toEqual({ type: 'Pause', reason: 'stale: no activity' });
    // Ten minutes (within the timer's resolution of a second) after the interaction's last work: its tool call starting.
    const lastWork = runes.filter((rune) => rune.stream.startsWith('chat/c1/') && rune.stream !== sent.actor && rune.at < pause.at).at(-1)!;
    expect(pause.at - lastWork.at).toBeGreaterThanOrEqual(10 * MINUTE);
    expect(pause.at - lastWork.at).toBeLessThanOrEqual(10 * MINUTE + 1000);
  });

  it("an idle actor does not time out while its chat's turn (started on the agent's stream) streams for 25 minutes; 10 quiet minutes after it ends, it does", async () => {
    const text = Array.from({ length: 24 }, (_, i) => `word${i} `);
    const { engine, scheduler, runes } = chatEngine([{ text: 'Hi.' }, { text }], MINUTE);
    const sent = await sendChatMessage(engine, 'c1', { userId: USER, message: 'hello' });
    const idle = () => runes.some((rune) => rune.stream === sent.actor && rune.kind === 'InteractionComplete');
    expect(await runVirtualTimeUntil(scheduler, () => runes.length, idle)).toBe(true);
    // A client talks to the chat's agent directly: the actor stays idle while its chat works.
    expect(await engine.dispatch(chat.turn, { type: 'start_turn', input: 'a long answer, please' })).toMatchObject({ accepted: true });
    const ended = await runVirtualTimeUntil(
      scheduler,
      () => runes.length,
      () => runes.some((rune) => rune.stream === sent.actor && rune.kind === 'InactivityTimeout'),
    );
    expect(ended).toBe(true);
    const turnEnd = runes.filter((rune) => rune.stream === chat.turn && rune.kind === 'turn.completed').at(-1)!;
    const timeout = runes.find((rune) => rune.stream === sent.actor && rune.kind === 'InactivityTimeout')!;
    expect(turnEnd.at).toBeGreaterThan(20 * MINUTE);
    // Ten minutes (within the timer's resolution) after the chat's last work rune, not after the actor's own.
    const lastWork = runes.filter((rune) => rune.stream.startsWith('chat/c1/') && rune.stream !== sent.actor && rune.at < timeout.at).at(-1)!;
    expect(timeout.at - lastWork.at).toBeGreaterThanOrEqual(10 * MINUTE);
    expect(timeout.at - lastWork.at).toBeLessThanOrEqual(10 * MINUTE + 1000);
  });
});
