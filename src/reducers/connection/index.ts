export { ConnectionEvent, ConnectionState, ConnectionStateName } from './schema.js';
export { connection } from './machine.js';
