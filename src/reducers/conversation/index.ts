export { ConversationEvent, ConversationInput, ConversationState, ConversationStateName } from './schema.js';
export { conversation } from './machine.js';
