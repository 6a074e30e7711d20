import type { Subscription } from 'rxjs';
import { createClient, type RunestreamClient } from '../../client/index.js';
import type { Rune } from '../../../reducers/rune.js';
import type { InspectorMachine } from '../inspector.js';
import type { DirectoryEntry } from '../stream-directory.js';
import { ApiError, InspectorApi, saveToken, savedToken } from './api.js';
import { Diagram } from './diagram.js';
import { jsonPatch } from '../../json-patch.js';
import { StreamList } from './stream-list.js';

/** Runes the timeline keeps in the DOM: the latest. */
const TIMELINE_ROWS = 1000;

const $ = <E extends HTMLElement = HTMLElement>(id: string): E => document.getElementById(id) as E;
const text = (tag: string, content: string, className?: string): HTMLElement => {
  const element = document.createElement(tag);
  element.textContent = content;
  if (className !== undefined) element.className = className;
  return element;
};
const button = (label: string, onClick: () => void): HTMLButtonElement => {
  const element = document.createElement('button');
  element.type = 'button';
  element.textContent = label;
  element.addEventListener('click', onClick);
  return element;
};
/** The value at a JSON Pointer (RFC 6901) in `value`. */
const valueAt = (value: unknown, pointer: string): unknown =>
  pointer
    .split('/')
    .slice(1)
    .reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key.replaceAll('~1', '/').replaceAll('~0', '~')], value);
const describe = (error: unknown): string => (error instanceof Error ? `${(error as { code?: string }).code ?? error.name}: ${error.message}` : String(error));

/** The page: the token (asked for when the server needs one), the live list, and the stream view. */
async function start(): Promise<void> {
  const token = savedToken();
  const api = new InspectorApi(token);
  let machines: Map<string, InspectorMachine>;
  try {
    machines = new Map((await api.machines()).machines.map((machine) => [machine.id, machine]));
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return askForToken(token === undefined ? '' : 'That token was refused.');
    $('connection').textContent = `cannot reach the inspector API: ${describe(error)}`;
    $('connection').dataset.state = 'error';
    return;
  }
  $('token-form').hidden = true;
  $('app').hidden = false;
  const client = createClient({ url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/`, ...(token === undefined ? {} : { token }) });
  const connection = $('connection');
  client.connectionState$.subscribe((state) => {
    connection.textContent = `connection: ${state}`;
    connection.dataset.state = state === 'OPEN' || state === 'SUBSCRIBED' ? 'open' : state === 'DISCONNECTED' ? 'closed' : 'connecting';
  });

  const view = new StreamView(client, api, machines);
  const machineFilter = $<HTMLSelectElement>('machine-filter');
  const list = new StreamList(
    $('stream-list'),
    $('stream-rows'),
    $('stream-count'),
    (entry) => void view.open(entry),
    (entries) => approvals(entries),
  );
  const refreshMachines = (): void => {
    const known = new Set([...machineFilter.options].map((option) => option.value));
    for (const machine of list.machines()) if (!known.has(machine)) machineFilter.append(new Option(machine, machine));
  };
  const search = $<HTMLInputElement>('search');
  const applyFilter = (): void => list.filter(search.value, machineFilter.value);
  search.addEventListener('input', applyFilter);
  machineFilter.addEventListener('change', applyFilter);

  /**
   * Tool calls waiting for a person: each shows its tool and arguments (as text, never as markup),
   * and only once they are shown gets its Approve (Deny is there from the start).
   */
  const approvalList = $('approval-list');
  const approvalItems = new Map<string, HTMLLIElement>();
  let waiting = '';
  function approvals(entries: ReadonlyMap<string, DirectoryEntry>): void {
    const calls = [...entries.values()].filter((entry) => entry.machine === 'tool-call' && entry.value === 'awaiting_approval');
    const key = calls.map((entry) => entry.stream).join('\n');
    if (key === waiting) return;
    waiting = key;
    for (const stream of approvalItems.keys()) if (!entries.has(stream) || entries.get(stream)?.value !== 'awaiting_approval') approvalItems.delete(stream);
    approvalList.replaceChildren(...calls.map((entry) => approvalItems.get(entry.stream) ?? approvalItem(entry)));
  }
  function approvalItem({ stream, seq }: DirectoryEntry): HTMLLIElement {
    const item = document.createElement('li');
    approvalItems.set(stream, item);
    const decide = (event: { type: 'approved'; approver: string } | { type: 'denied'; reason: string }) => () => {
      $('approval-error').textContent = '';
      client.dispatch(stream, event).catch((error: unknown) => {
        $('approval-error').textContent = `${stream}: ${describe(error)}`;
      });
    };
    const call = text('div', 'loading the call…', 'call');
    const deny = button('Deny', decide({ type: 'denied', reason: 'denied in the inspector' }));
    item.append(text('span', stream, 'id'), call, deny);
    api.state(stream, seq).then(
      ({ state }) => {
        const { toolName, arguments: args, policyReason } = state as { toolName?: unknown; arguments?: unknown; policyReason?: unknown };
        call.replaceChildren(
          text('span', String(toolName), 'tool'),
          ...(typeof policyReason === 'string' ? [text('span', policyReason, 'reason')] : []),
          text('pre', JSON.stringify(args, null, 2) ?? 'undefined', 'arguments'),
        );
        item.insertBefore(button('Approve', decide({ type: 'approved', approver: 'inspector' })), deny);
      },
      (error: unknown) => call.replaceChildren(text('span', `cannot show the call, so it cannot be approved here: ${describe(error)}`, 'error')),
    );
    return item;
  }

  const feedState = (state: string): void => {
    if (state !== 'open') connection.textContent = `list: ${state}`;
  };
  api.feed({
    streams: (entries) => {
      list.reset(entries);
      refreshMachines();
    },
    changes: (entries) => {
      list.update(entries);
      refreshMachines();
    },
    open: () => feedState('open'),
    error: (closed) => feedState(closed ? 'refused by the server (too many readers?): reload to try again' : 'reconnecting'),
  });
}

/** Shows the token form; a token given is kept for this tab, and the page starts again with it. */
function askForToken(why: string): void {
  const form = $<HTMLFormElement>('token-form');
  form.hidden = false;
  $('token-error').textContent = why;
  $('connection').textContent = 'token needed';
  $('token').focus();
  form.addEventListener(
    'submit',
    (event) => {
      event.preventDefault();
      saveToken($<HTMLInputElement>('token').value);
      void start();
    },
    { once: true },
  );
}

/** A turn's text in the talk box, one paragraph per model call (its `messages`), so a preamble before a tool round stands apart from the answer. */
const showMessages = (messages: readonly string[]): void => {
  $('talk-answer').replaceChildren(...messages.filter((message) => message !== '').map((message) => text('p', message, 'talk-message')));
};

/** The open stream: its state and diagram, live; its runes; time travel; its actions. */
class StreamView {
  #subscriptions: Subscription[] = [];
  #diagram: Diagram | undefined;
  #stream: string | undefined;
  #lastSeq = 0;

  constructor(
    private readonly client: RunestreamClient,
    private readonly api: InspectorApi,
    private readonly machines: ReadonlyMap<string, InspectorMachine>,
  ) {
    $('travel-go').addEventListener('click', () => void this.#travel());
    $<HTMLFormElement>('talk').addEventListener('submit', (event) => {
      event.preventDefault();
      void this.#talk();
    });
  }

  async open(entry: DirectoryEntry): Promise<void> {
    for (const subscription of this.#subscriptions) subscription.unsubscribe();
    this.#subscriptions = [];
    this.#stream = entry.stream;
    this.#lastSeq = 0;
    $('placeholder').hidden = true;
    $('stream-view').hidden = false;
    $('stream-title').textContent = entry.stream;
    $('action-error').textContent = '';
    $('travel-state').textContent = '';
    $('travel-diff').replaceChildren();
    $('talk-answer').replaceChildren();
    $('talk').hidden = entry.machine !== 'turn-engine';
    $('timeline').replaceChildren();
    const machine = this.machines.get(entry.machine);
    this.#diagram = machine === undefined || machine.states.length === 0 ? undefined : new Diagram(machine);
    $('diagram').replaceChildren(...(this.#diagram === undefined ? [] : [this.#diagram.element]));
    this.#diagram?.highlight(entry.value);
    $<HTMLInputElement>('travel-seq').value = String(entry.seq);

    const stream = entry.stream;
    // Live first, then the history: the runes heard while the history loads wait, and nothing
    // falls between the two (the server's snapshot comes before the first live rune).
    let waiting: Rune[] | undefined = [];
    let subscribed!: () => void;
    const first = new Promise<void>((resolve) => (subscribed = resolve));
    this.#subscriptions.push(
      this.client.state$<{ value?: string; output?: string; messages?: string[] }>(stream).subscribe({
        next: (state) => {
          subscribed();
          $('stream-state').textContent = `state: ${state?.value ?? '(no state name)'}`;
          this.#diagram?.highlight(state?.value);
          if (typeof state?.output === 'string') showMessages(state.messages ?? [state.output]);
        },
        error: (error: unknown) => {
          subscribed();
          $('action-error').textContent = describe(error);
        },
      }),
      this.client.runes$(stream).subscribe((rune) => {
        if (waiting === undefined) this.#append(rune);
        else waiting.push(rune);
      }),
    );
    await first;
    if (this.#stream !== stream) return;
    try {
      const page = await this.api.runes(stream, Math.max(0, entry.seq - TIMELINE_ROWS));
      if (this.#stream !== stream) return;
      for (const rune of page.runes) this.#append(rune);
    } catch (error) {
      $('action-error').textContent = describe(error);
    }
    for (const rune of waiting) this.#append(rune);
    waiting = undefined;
  }

  #append(rune: Rune): void {
    if (rune.seq <= this.#lastSeq) return;
    this.#lastSeq = rune.seq;
    const item = document.createElement('li');
    const details = document.createElement('details');
    const move = rune.from === undefined || rune.to === undefined || rune.from === rune.to ? '' : ` ${rune.from} → ${rune.to}`;
    details.append(
      text('summary', `#${rune.seq} ${rune.kind}${move} ${new Date(rune.at).toISOString()}`),
      text('pre', JSON.stringify({ event: rune.event, ...(rune.payload === undefined ? {} : { payload: rune.payload }) }, null, 2)),
    );
    item.dataset.seq = String(rune.seq);
    item.append(details);
    const timeline = $('timeline');
    timeline.append(item);
    while (timeline.children.length > TIMELINE_ROWS) timeline.firstElementChild?.remove();
    $<HTMLInputElement>('travel-seq').max = String(rune.seq);
  }

  async #travel(): Promise<void> {
    const stream = this.#stream;
    if (stream === undefined) return;
    const seq = Number($<HTMLInputElement>('travel-seq').value);
    const compare = $<HTMLInputElement>('travel-compare').value;
    try {
      const at = await this.api.state(stream, seq);
      $('travel-state').textContent = JSON.stringify(at.state, null, 2);
      const diff = $('travel-diff');
      diff.replaceChildren();
      if (compare !== '') {
        const other = await this.api.state(stream, Number(compare));
        const changes = jsonPatch(other.state, at.state);
        diff.replaceChildren(
          ...(changes.length === 0
            ? [text('li', `no difference between seq ${compare} and seq ${seq}`)]
            : changes.map((change) => {
                const item = text('li', `${change.path || '(the whole state)'}: `);
                if (change.op !== 'add') item.append(text('span', JSON.stringify(valueAt(other.state, change.path)), 'removed'));
                item.append(' → ');
                if ('value' in change) item.append(text('span', JSON.stringify(change.value), 'added'));
                return item;
              })),
        );
      }
    } catch (error) {
      $('travel-state').textContent = describe(error);
    }
  }

  async #talk(): Promise<void> {
    const stream = this.#stream;
    const input = $<HTMLInputElement>('talk-input');
    if (stream === undefined || input.value.trim() === '') return;
    $('talk-answer').replaceChildren();
    try {
      await this.client.dispatch(stream, { type: 'start_turn', input: input.value });
      input.value = '';
    } catch (error) {
      $('action-error').textContent = describe(error);
    }
  }
}

void start();
