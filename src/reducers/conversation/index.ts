export { ConversationEvent, ConversationInput, ConversationPayloads, ConversationState, ConversationStateName } from './schema.js';
export { conversation } from './machine.js';
