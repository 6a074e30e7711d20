export {
  ConversationEvent,
  DEFAULT_ERROR_THRESHOLD,
  ErrorThreshold,
  TurnOutcome,
  ConversationInput,
  ConversationPayloads,
  ConversationState,
  ConversationStateName,
} from './schema.js';
export { conversation } from './machine.js';
