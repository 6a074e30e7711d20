import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  AgentInput,
  agentEventSchema,
  agentStateSchema,
  reActContextSchema,
  toolCallRecordSchema,
  toolDefinitionSchema,
  type AddToolCallsToContextInput,
  type AgentState,
  type ExpandContextWindowInput,
  type LlmChunkInput,
  type LlmMessageCompleteInput,
  type ReActContext,
  type ToolCallRecord,
  type ToolCallResult,
  type ToolCallResultInput,
  type ToolCallStartedInput,
  type ToolDefinition,
  type UserMessageInput,
} from '../../src/index.js';

/** Seed 004's "API Reference": every type and schema it names is exported from the package root. */
describe("seed 004's API Reference names", () => {
  it('every input type it names is one input of AgentInput, by its type', () => {
    expectTypeOf<UserMessageInput['type']>().toEqualTypeOf<'user-message-received'>();
    expectTypeOf<LlmChunkInput['type']>().toEqualTypeOf<'llm-message-started'>();
    expectTypeOf<LlmMessageCompleteInput['type']>().toEqualTypeOf<'llm-message-completed'>();
    expectTypeOf<ToolCallStartedInput['type']>().toEqualTypeOf<'re-act-observed'>();
    expectTypeOf<ToolCallResultInput['type']>().toEqualTypeOf<'tool-call-completed'>();
    expectTypeOf<ExpandContextWindowInput['type']>().toEqualTypeOf<'context-window-expanded'>();
    expectTypeOf<AddToolCallsToContextInput['type']>().toEqualTypeOf<'history-tool-calls-added'>();
    expectTypeOf<UserMessageInput>().toExtend<AgentInput>();
    expectTypeOf<AddToolCallsToContextInput>().toExtend<AgentInput>();
    // A value of a named input type is an input the schema accepts.
    const asked: UserMessageInput = { type: 'user-message-received', messageId: 'm1', content: 'Hi', timestamp: 1 };
    expect(agentEventSchema.parse(asked)).toEqual(asked);
  });

  it('its state types and schemas', () => {
    expectTypeOf<AgentState['reActContext']>().toEqualTypeOf<ReActContext | null>();
    expectTypeOf<AgentState['tools'][string]>().toEqualTypeOf<ToolDefinition>();
    expectTypeOf<AgentState['toolCalls'][string]>().toEqualTypeOf<ToolCallRecord>();
    expectTypeOf<NonNullable<ToolCallRecord['result']>>().toEqualTypeOf<ToolCallResult>();
    expect([agentStateSchema, agentEventSchema, toolDefinitionSchema, toolCallRecordSchema, reActContextSchema].every((schema) => typeof schema.parse === 'function')).toBe(
      true,
    );
  });
});
