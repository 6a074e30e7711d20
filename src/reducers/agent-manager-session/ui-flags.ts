import type { AgentManagerSessionState, AgentManagerSessionStateName } from './schema.js';

/** What a UI shows for a session (seed 001 "Derived UI State"). */
export interface AgentManagerUiFlags {
  showSpinner: boolean;
  showCancelButton: boolean;
  showResumeButton: boolean;
  /** Only in auto-approve mode. */
  showAutoModeWarning: boolean;
  inputEnabled: boolean;
  isActive: boolean;
}

/** The seed's table: the states where each flag is true. */
const statesWhereTrue: { readonly [Flag in keyof AgentManagerUiFlags]: readonly AgentManagerSessionStateName[] } = {
  showSpinner: ['creating', 'streaming'],
  showCancelButton: ['creating', 'streaming', 'waiting_approval', 'waiting_input'],
  showResumeButton: ['paused', 'stopped', 'completed'],
  showAutoModeWarning: ['creating', 'streaming'],
  inputEnabled: ['waiting_input', 'completed', 'paused', 'stopped'],
  isActive: ['creating', 'streaming', 'waiting_approval', 'waiting_input'],
};

/**
 * The UI flags of a session state, exactly as seed 001's "Derived UI State" table gives them.
 *
 * @example
 * ```ts
 * import { agentManagerSession, agentManagerUiFlags } from 'runestream';
 * const s = { ...agentManagerSession.initial({ autoApprove: true }), value: 'streaming' as const };
 * console.log(agentManagerUiFlags(s));
 * // Logs: { showSpinner: true, showCancelButton: true, showResumeButton: false,
 * //   showAutoModeWarning: true, inputEnabled: false, isActive: true }
 * ```
 */
export function agentManagerUiFlags(state: Pick<AgentManagerSessionState, 'value' | 'autoApprove'>): AgentManagerUiFlags {
  const on = (flag: keyof AgentManagerUiFlags) => statesWhereTrue[flag].includes(state.value);
  return {
    showSpinner: on('showSpinner'),
    showCancelButton: on('showCancelButton'),
    showResumeButton: on('showResumeButton'),
    showAutoModeWarning: on('showAutoModeWarning') && state.autoApprove,
    inputEnabled: on('inputEnabled'),
    isActive: on('isActive'),
  };
}
