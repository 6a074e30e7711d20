import { z } from 'zod';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { AgentRegistrationEvent, AgentRegistrationState, AgentRegistrationStateName } from './schema.js';

type S = AgentRegistrationState;
type E = AgentRegistrationEvent;

/** Seed 002 section 3, edge for edge. */
const table: readonly Row<S, E>[] = [
  { from: 'REGISTERED', on: 'register', to: 'ACTIVATING' },
  { from: 'ACTIVATING', on: 'init_succeeded', to: 'ACTIVE' },
  { from: 'ACTIVATING', on: 'init_failed', to: 'ERROR', assign: (_, e) => ({ error: e.error }) },
  { from: 'ACTIVE', on: 'pause', to: 'PAUSED', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'PAUSED', on: 'resume', to: 'ACTIVE', assign: () => ({ reason: undefined }) },
  { from: 'ACTIVE', on: 'remove', to: 'DECOMMISSIONED' },
  { from: 'ERROR', on: 'retry_init', to: 'RETRYING' },
  { from: 'RETRYING', on: 'retry_succeeded', to: 'ACTIVE', assign: () => ({ error: undefined }) },
  {
    from: 'RETRYING',
    on: 'retry_failed',
    to: 'DECOMMISSIONED',
    assign: (s, e) => ({ error: e.error ?? s.error }),
    source: 'design',
    note: 'the seed\'s "repeated failure": the retry effect sends it once it gives up',
  },
];

/**
 * An agent's registration lifecycle (seed 002): registered, activated, paused and resumed,
 * retried after a failed initialisation, and finally decommissioned (terminal).
 *
 * @example
 * ```ts
 * import { agentRegistration } from 'runestream';
 * let s = agentRegistration.initial();                                   // { value: 'REGISTERED' }
 * s = agentRegistration.transition(s, { type: 'register' });             // ACTIVATING
 * s = agentRegistration.transition(s, { type: 'init_failed', error: 'no API key' });
 * console.log(s);                                                        // Logs: { value: 'ERROR', error: 'no API key' }
 * console.log(agentRegistration.step(s, { type: 'resume' }).accepted);   // Logs: false
 * ```
 */
export const agentRegistration = defineMachine<S, E>({
  id: 'agent-registration',
  states: AgentRegistrationStateName.options,
  terminal: ['DECOMMISSIONED'],
  events: eventTypesOf(AgentRegistrationEvent),
  schemas: { state: AgentRegistrationState, event: AgentRegistrationEvent, input: z.void() },
  initial: () => ({ value: 'REGISTERED' }),
  table,
});
