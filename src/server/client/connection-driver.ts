import { BehaviorSubject, timer, type SchedulerLike, type Subscription } from 'rxjs';
import { connection, type ConnectionEvent, type ConnectionState } from '../../reducers/connection/index.js';
import type { CloseEventLike, ErrorEventLike, MessageEventLike, WebSocketConstructor, WebSocketLike } from './web-socket.js';
import { errorText } from '../../reducers/error-text.js';

/** How a socket dropped, for the report on `errors$`. */
export interface SocketDrop {
  /** The close code (1006: no close frame, the socket just went away). */
  readonly code: number;
  readonly reason: string;
  /** What the error event said, when the socket failed with one (a refused connection, a rejected handshake). */
  readonly error?: string;
}

export interface ConnectionDriverOptions {
  readonly socketUrl: string;
  readonly WebSocket: WebSocketConstructor;
  readonly scheduler: SchedulerLike;
  /** The backoff delay before reconnect attempt `attempt` (1 for the first). */
  readonly delayOf: (attempt: number) => number;
  /** The socket opened (the machine is OPEN): send what waited for it. */
  readonly onOpen: () => void;
  /** A frame arrived on the open socket. */
  readonly onMessage: (data: unknown) => void;
  /** The socket dropped (the machine is DISCONNECTED); a reconnect is scheduled right after, unless closed. */
  readonly onDrop: (drop: SocketDrop) => void;
}

/** The `connection` machine driven over a real socket. */
export interface ConnectionDriver {
  /** The machine's state: current, then every change. Completes once closed. */
  readonly state: BehaviorSubject<ConnectionState>;
  /** Whether frames can be sent now (OPEN or SUBSCRIBED). */
  readonly isOpen: boolean;
  /** Opens the first socket, if none was opened yet; later ones open through reconnects. */
  connect(): void;
  /** Sends a frame; only while {@link isOpen}. */
  send(frame: string): void;
  /** Applies a `subscribe` / `unsubscribe` of a stream to the machine. */
  apply(event: Extract<ConnectionEvent, { type: 'subscribe' | 'unsubscribe' }>): void;
  /** Stops reconnecting and closes the socket; resolves once it is closed. */
  close(): Promise<void>;
}

/**
 * Runs the `connection` machine as data: every change of the socket becomes an event applied
 * with `connection.transition`, and what the machine's state says is what the driver does.
 *
 * 1. `connect()`: `open_socket`, and a socket is created (CONNECTING).
 * 2. The socket's open event: `handshake_success` (OPEN, `attempt` back to 0), then `onOpen`.
 * 3. The socket's close event: `error` if an error event came before it, else `close`
 *    (DISCONNECTED), then `onDrop`; then `schedule_reconnect` (RECONNECTING, `attempt` + 1) and a
 *    timer on the scheduler for the backoff delay of that `attempt`, after which `reconnect`
 *    (CONNECTING) and a new socket.
 * 4. `close()`: cancels the timer, applies `close` and closes the socket; nothing reconnects.
 */
export function createConnectionDriver(options: ConnectionDriverOptions): ConnectionDriver {
  const state = new BehaviorSubject<ConnectionState>(connection.initial());
  let socket: WebSocketLike | undefined;
  let reconnectTimer: Subscription | undefined;
  let closed = false;
  let socketClosed: Promise<void> = Promise.resolve();

  const apply = (event: ConnectionEvent): void => {
    if (closed) return; // the state completed at close(); nothing changes it after
    const next = connection.transition(state.value, event);
    if (next !== state.value) state.next(next);
  };
  const isOpen = (): boolean => state.value.value === 'OPEN' || state.value.value === 'SUBSCRIBED';

  function openSocket(): void {
    let current: WebSocketLike;
    try {
      current = new options.WebSocket(options.socketUrl);
    } catch (error) {
      // A constructor that throws (a URL the platform refuses, a CSP rule) is one more failed attempt.
      dropped({ code: 1006, reason: '', error: `new WebSocket(${options.socketUrl}) threw: ${errorText(error)}` });
      return;
    }
    socket = current;
    let lastError: string | undefined;
    socketClosed = new Promise((resolve) => {
      current.onclose = (event: CloseEventLike) => {
        resolve();
        if (socket !== current) return; // closed by close(): nothing more to do
        socket = undefined;
        dropped({ code: event.code, reason: event.reason, ...(lastError === undefined ? {} : { error: lastError }) });
      };
    });
    current.onopen = () => {
      if (socket !== current) return;
      apply({ type: 'handshake_success' });
      options.onOpen();
    };
    current.onmessage = (event: MessageEventLike) => {
      if (socket === current) options.onMessage(event.data);
    };
    // Both browsers and ws follow an error event with a close event: the drop is handled there.
    // The handler must stay set even after close(): ws throws an error event nobody listens to.
    current.onerror = (event: ErrorEventLike) => {
      lastError = event.message || 'WebSocket error';
    };
  }

  function dropped(drop: SocketDrop): void {
    apply(drop.error === undefined ? { type: 'close' } : { type: 'error', error: drop.error });
    options.onDrop(drop);
    if (closed) return;
    apply({ type: 'schedule_reconnect' });
    reconnectTimer = timer(options.delayOf(state.value.attempt), options.scheduler).subscribe(() => {
      reconnectTimer = undefined;
      apply({ type: 'reconnect' });
      openSocket();
    });
  }

  return {
    state,
    get isOpen() {
      return isOpen();
    },
    connect() {
      if (closed || socket !== undefined || reconnectTimer !== undefined || state.value.value !== 'DISCONNECTED') return;
      apply({ type: 'open_socket' });
      openSocket();
    },
    send(frame) {
      if (!isOpen() || socket === undefined) throw new Error(`cannot send while the connection is ${state.value.value}`);
      socket.send(frame);
    },
    apply,
    close() {
      if (closed) return socketClosed;
      reconnectTimer?.unsubscribe();
      reconnectTimer = undefined;
      const current = socket;
      socket = undefined;
      if (current !== undefined) current.close(1000, 'client closed');
      apply({ type: 'close' }); // from any state but DISCONNECTED: the connection ends DISCONNECTED
      closed = true;
      state.complete();
      return socketClosed;
    },
  };
}
