import { assign, setup } from 'xstate';

type Event =
  | { type: 'ProcessInteraction'; userId: string }
  | { type: 'Pause'; reason?: string }
  | { type: 'Cancel'; reason: string }
  | { type: 'Ping' }
  | { type: 'Shutdown' }
  | { type: 'InteractionComplete'; success: boolean; error?: string }
  | { type: 'InactivityTimeout' }
  | { type: 'Error'; error: string };

interface Context {
  userId?: string;
  reason?: string;
  error?: string;
}

/**
 * The anchor: seed 000's chat actor written the idiomatic XState v5 way, with the same rows,
 * guards and context updates as runestream's `chatActor` (test/bench/xstate-twin.test.ts checks).
 * "Any -> Error" and "Any -> Cancelled" sit on each live state: a root-level `on` would also fire
 * in XState's final states, which seed 000 forbids.
 */
export const xstateChatActor = setup({
  types: { context: {} as Context, events: {} as Event },
  actions: {
    recordUser: assign({ userId: ({ event }) => (event.type === 'ProcessInteraction' ? event.userId : undefined) }),
    resume: assign({
      userId: ({ event }) => (event.type === 'ProcessInteraction' ? event.userId : undefined),
      reason: undefined,
    }),
    recordReason: assign({ reason: ({ event }) => (event.type === 'Pause' || event.type === 'Cancel' ? event.reason : undefined) }),
    recordError: assign({
      error: ({ event }) => (event.type === 'Error' ? event.error : event.type === 'InteractionComplete' ? (event.error ?? 'interaction failed') : undefined),
    }),
  },
}).createMachine({
  id: 'chat-actor',
  initial: 'idle',
  context: {},
  states: {
    idle: {
      on: {
        ProcessInteraction: { target: 'running', actions: 'recordUser' },
        Pause: { target: 'paused', actions: 'recordReason' },
        InactivityTimeout: 'completed',
        Ping: {},
        Shutdown: {},
        Error: { target: 'error', actions: 'recordError' },
        Cancel: { target: 'cancelled', actions: 'recordReason' },
      },
    },
    running: {
      on: {
        InteractionComplete: [
          { guard: ({ event }) => event.success, target: 'idle' },
          { target: 'error', actions: 'recordError' },
        ],
        Pause: { target: 'paused', actions: 'recordReason' },
        Ping: {},
        Shutdown: {},
        Error: { target: 'error', actions: 'recordError' },
        Cancel: { target: 'cancelled', actions: 'recordReason' },
      },
    },
    paused: {
      on: {
        ProcessInteraction: { target: 'idle', actions: 'resume' },
        InactivityTimeout: 'completed',
        Ping: {},
        Shutdown: {},
        Error: { target: 'error', actions: 'recordError' },
        Cancel: { target: 'cancelled', actions: 'recordReason' },
      },
    },
    error: { type: 'final' },
    cancelled: { type: 'final' },
    completed: { type: 'final' },
  },
});
