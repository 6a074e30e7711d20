import dagre from '@dagrejs/dagre';
import type { InspectorMachine } from '../inspector.js';

const SVG = 'http://www.w3.org/2000/svg';
const NODE_HEIGHT = 30;
const CHAR_WIDTH = 7;

const svg = <K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number>): SVGElementTagNameMap[K] => {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  return element;
};

/**
 * A machine's state diagram, laid out by dagre from its table's edges (one arrow per state
 * pair, labelled with its events), as SVG. `highlight` marks the current state: the node with
 * `data-state` of that name gets the class `current`.
 */
export class Diagram {
  readonly element: SVGSVGElement;
  readonly #nodes = new Map<string, SVGGElement>();

  constructor(machine: InspectorMachine) {
    const graph = new dagre.graphlib.Graph({ multigraph: false });
    graph.setGraph({ rankdir: 'LR', nodesep: 20, ranksep: 60, marginx: 60, marginy: 30 }); // room for self-loops' labels
    graph.setDefaultEdgeLabel(() => ({}));
    for (const state of machine.states) graph.setNode(state, { label: state, width: state.length * CHAR_WIDTH + 20, height: NODE_HEIGHT });
    const labels = new Map<string, Set<string>>();
    for (const edge of machine.edges) {
      const key = `${edge.from}\u0000${edge.to}`;
      labels.set(key, (labels.get(key) ?? new Set()).add(edge.on));
    }
    for (const [key, events] of labels) {
      const [from, to] = key.split('\u0000') as [string, string];
      const label = [...events].join(', ');
      graph.setEdge(from, to, { label, width: Math.min(label.length, 40) * CHAR_WIDTH * 0.8, height: 14, labelpos: 'c' });
    }
    dagre.layout(graph);
    const { width = 0, height = 0 } = graph.graph();
    this.element = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': `state diagram of ${machine.id}` });
    const defs = svg('defs', {});
    const marker = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' });
    marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#999' }));
    defs.append(marker);
    this.element.append(defs);
    for (const { v, w } of graph.edges()) {
      const edge = graph.edge(v, w) as { points: { x: number; y: number }[]; label: string; x: number; y: number };
      const group = svg('g', { class: 'edge' });
      if (v === w) {
        const node = graph.node(v);
        const top = node.y - NODE_HEIGHT / 2;
        group.append(svg('path', { d: `M ${node.x - 8} ${top} C ${node.x - 20} ${top - 24}, ${node.x + 20} ${top - 24}, ${node.x + 8} ${top}`, 'marker-end': 'url(#arrow)' }));
        const text = svg('text', { x: node.x, y: top - 20, 'text-anchor': 'middle' });
        text.textContent = edge.label;
        group.append(text);
      } else {
        group.append(svg('path', { d: `M ${edge.points.map((p) => `${p.x} ${p.y}`).join(' L ')}`, 'marker-end': 'url(#arrow)' }));
        const text = svg('text', { x: edge.x, y: edge.y, 'text-anchor': 'middle' });
        text.textContent = edge.label;
        group.append(text);
      }
      this.element.append(group);
    }
    for (const state of machine.states) {
      const node = graph.node(state);
      const classes = machine.terminal.includes(state) ? 'node terminal' : 'node';
      const group = svg('g', { class: classes, 'data-state': state });
      group.append(svg('rect', { x: node.x - node.width / 2, y: node.y - NODE_HEIGHT / 2, width: node.width, height: NODE_HEIGHT, rx: 6 }));
      const text = svg('text', { x: node.x, y: node.y + 4, 'text-anchor': 'middle' });
      text.textContent = state;
      group.append(text);
      this.element.append(group);
      this.#nodes.set(state, group);
    }
  }

  /** Marks `state` as the current one (and no other). */
  highlight(state: string | undefined): void {
    for (const [name, node] of this.#nodes) node.classList.toggle('current', name === state);
  }
}
