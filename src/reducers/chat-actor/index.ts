export { ChatActorEvent, ChatActorState, ChatActorStateName } from './schema.js';
export { chatActor } from './machine.js';
export { chatActorNotices, type ChatActorNotice } from './notices.js';
