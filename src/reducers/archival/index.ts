export { ArchivalEvent, ArchivalState, ArchivalStateName } from './schema.js';
export { archival } from './machine.js';
