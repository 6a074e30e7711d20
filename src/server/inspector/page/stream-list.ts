import type { DirectoryEntry } from '../stream-directory.js';

/** Rows drawn beyond the visible ones, above and below, so scrolling shows no blank. */
const OVERSCAN = 8;
const ROW_HEIGHT = 28;

/** Whether `entry` matches a search: every word is in its stream id, machine or state name. */
export function matchesSearch(entry: DirectoryEntry, search: string, machine: string): boolean {
  if (machine !== '' && entry.machine !== machine) return false;
  const text = `${entry.stream} ${entry.machine} ${entry.value ?? ''}`.toLowerCase();
  return search
    .toLowerCase()
    .split(/\s+/)
    .every((word) => text.includes(word));
}

/**
 * The stream list: every stream the feed gave, filtered and searched, most recently active first,
 * drawn as a virtual list (only the rows in view are in the DOM, however many streams there are),
 * keyboard-driven (arrows, Page Up/Down, Home/End move; Enter opens).
 */
export class StreamList {
  readonly #entries = new Map<string, DirectoryEntry>();
  #shown: DirectoryEntry[] = [];
  #search = '';
  #machine = '';
  #active = 0;
  #selected: string | undefined;
  #dirty = false;

  constructor(
    private readonly scroller: HTMLElement,
    private readonly rows: HTMLElement,
    private readonly count: HTMLElement,
    private readonly onOpen: (entry: DirectoryEntry) => void,
    private readonly onChange: (entries: ReadonlyMap<string, DirectoryEntry>) => void,
  ) {
    scroller.addEventListener('scroll', () => this.#draw());
    scroller.addEventListener('keydown', (event) => this.#key(event));
    rows.addEventListener('click', (event) => {
      const row = (event.target as HTMLElement).closest<HTMLElement>('.row');
      if (row?.dataset.index !== undefined) this.#open(Number(row.dataset.index));
    });
  }

  /** Replaces every entry (the feed's first event, or after it reconnected). */
  reset(entries: readonly DirectoryEntry[]): void {
    this.#entries.clear();
    this.update(entries);
  }

  /** Applies changed entries; the list is redrawn once per animation frame, however many come. */
  update(entries: readonly DirectoryEntry[]): void {
    for (const entry of entries) this.#entries.set(entry.stream, entry);
    this.onChange(this.#entries);
    if (this.#dirty) return;
    this.#dirty = true;
    requestAnimationFrame(() => {
      this.#dirty = false;
      this.#refilter();
    });
  }

  filter(search: string, machine: string): void {
    this.#search = search.trim();
    this.#machine = machine;
    this.#active = 0;
    this.#refilter();
  }

  /** The machines of the streams listed, for the filter. */
  machines(): string[] {
    return [...new Set([...this.#entries.values()].map((entry) => entry.machine))].sort();
  }

  #refilter(): void {
    this.#shown = [...this.#entries.values()]
      .filter((entry) => matchesSearch(entry, this.#search, this.#machine))
      .sort((a, b) => b.at - a.at || (a.stream < b.stream ? -1 : 1));
    this.count.textContent = `${this.#shown.length} of ${this.#entries.size} streams`;
    this.rows.style.height = `${this.#shown.length * ROW_HEIGHT}px`;
    this.#active = Math.min(this.#active, Math.max(0, this.#shown.length - 1));
    this.#draw();
  }

  #draw(): void {
    const first = Math.max(0, Math.floor(this.scroller.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(this.#shown.length, Math.ceil((this.scroller.scrollTop + this.scroller.clientHeight) / ROW_HEIGHT) + OVERSCAN);
    const rows: HTMLElement[] = [];
    for (let index = first; index < last; index++) {
      const entry = this.#shown[index]!;
      const row = document.createElement('div');
      row.className = index === this.#active ? 'row active' : 'row';
      row.setAttribute('role', 'option');
      row.setAttribute('aria-selected', String(entry.stream === this.#selected));
      row.id = `stream-row-${index}`;
      row.dataset.index = String(index);
      row.dataset.stream = entry.stream;
      row.style.top = `${index * ROW_HEIGHT}px`;
      const id = document.createElement('span');
      id.className = 'id';
      id.textContent = entry.stream;
      const machine = document.createElement('span');
      machine.textContent = entry.machine;
      const value = document.createElement('span');
      value.className = 'value';
      value.textContent = entry.value ?? '';
      const at = document.createElement('time');
      at.dateTime = new Date(entry.at).toISOString();
      at.textContent = new Date(entry.at).toLocaleTimeString();
      at.title = `last active ${at.dateTime}`;
      const seq = document.createElement('span');
      seq.textContent = `#${entry.seq}`;
      row.append(id, machine, value, at, seq);
      rows.push(row);
    }
    this.rows.replaceChildren(...rows);
    this.scroller.setAttribute('aria-activedescendant', `stream-row-${this.#active}`);
  }

  #key(event: KeyboardEvent): void {
    const page = Math.max(1, Math.floor(this.scroller.clientHeight / ROW_HEIGHT) - 1);
    const moves: Record<string, number> = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page, Home: -Infinity, End: Infinity };
    if (event.key === 'Enter') {
      event.preventDefault();
      return this.#open(this.#active);
    }
    const move = moves[event.key];
    if (move === undefined || this.#shown.length === 0) return;
    event.preventDefault();
    this.#active = Math.max(0, Math.min(this.#shown.length - 1, this.#active + move));
    const top = this.#active * ROW_HEIGHT;
    if (top < this.scroller.scrollTop) this.scroller.scrollTop = top;
    else if (top + ROW_HEIGHT > this.scroller.scrollTop + this.scroller.clientHeight) this.scroller.scrollTop = top + ROW_HEIGHT - this.scroller.clientHeight;
    this.#draw();
  }

  #open(index: number): void {
    const entry = this.#shown[index];
    if (entry === undefined) return;
    this.#active = index;
    this.#selected = entry.stream;
    this.#draw();
    this.onOpen(entry);
  }
}
