import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** A transition drawn in a seed's Mermaid diagram: `from --> to : label`. */
export interface DrawnEdge {
  from: string;
  to: string;
  label: string;
}

/** The seed documents, vendored verbatim in test/fixtures/seeds so tests need nothing outside the repo. */
export function readSeed(file: string): string {
  return readFileSync(fileURLToPath(new URL(`../fixtures/seeds/${file}`, import.meta.url)), 'utf8');
}

/**
 * The edges of every `stateDiagram-v2` block in a seed, or of the block that follows `heading`.
 * Composite-state braces, notes and `[*]` edges are skipped: only state-to-state transitions.
 */
export function drawnEdges(seed: string, heading?: string): DrawnEdge[] {
  let text = seed;
  if (heading !== undefined) {
    const at = seed.indexOf(heading);
    if (at < 0) throw new Error(`heading not found: ${heading}`);
    text = seed.slice(at);
    const end = text.indexOf('```', text.indexOf('```mermaid') + 10);
    text = text.slice(0, end);
  }
  const edges: DrawnEdge[] = [];
  const re = /^\s*([A-Za-z_]\w*)\s*-->\s*([A-Za-z_]\w*)\s*(?::\s*(.*))?$/;
  let inNote = false;
  for (const line of text.split('\n')) {
    if (/^\s*note\b/.test(line)) inNote = true;
    if (/^\s*end note/.test(line)) {
      inNote = false;
      continue;
    }
    if (inNote) continue;
    const m = re.exec(line);
    if (m) edges.push({ from: m[1]!, to: m[2]!, label: (m[3] ?? '').trim() });
  }
  return edges;
}

/** The edges of a generated diagram, as `from --> to : label` strings. */
export function generatedEdges(mermaid: string): DrawnEdge[] {
  return drawnEdges(mermaid);
}

/**
 * Asserts that every drawn edge is in the machine's table: for each edge, each event its label
 * stands for (`eventsFor`) has a row from `from` to `to`. Returns the edges checked, for counting.
 */
export function missingDrawnEdges(
  edges: readonly { from: string; on: string; to: string }[],
  drawn: readonly DrawnEdge[],
  eventsFor: (edge: DrawnEdge) => readonly string[],
): string[] {
  const missing: string[] = [];
  for (const d of drawn) {
    const events = eventsFor(d);
    if (events.length === 0) missing.push(`${d.from} --> ${d.to} : ${d.label} (no event mapped)`);
    for (const on of events) {
      if (!edges.some((e) => e.from === d.from && e.to === d.to && e.on === on)) {
        missing.push(`${d.from} --> ${d.to} : ${on} (drawn as "${d.label}")`);
      }
    }
  }
  return missing;
}
