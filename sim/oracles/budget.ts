import type { Rune } from '../../src/reducers/rune.js';
import { turnEdgeOf } from '../../src/reducers/turn-edges.js';
import type { FakeLlm } from '../fake-llm.js';
import { BusyAgents } from './busy-agents.js';
import type { Finding, Oracle } from './oracle.js';

/**
 * Budgets from the model API's own count: the calls answered for a conversation's agents never
 * exceed its `modelCalls` limit plus the number of its agents whose turn was open when the limit
 * was reached (each may finish the model call it had under way: README's "next safe boundary"),
 * whatever kind of agent made them. A turn whose start is logged at that same instant was open
 * then (a ReAct call's answer may come before its lifecycle's `turn.started` rune is appended).
 * A `budget_replenished` with a new budget moves the limit; one below the calls answered already
 * is reached at once, those calls no overrun of it.
 */
export const budgetOracle = (llm: FakeLlm, modelCalls: number): Oracle => {
  const agents = new BusyAgents();
  /**
   * Per conversation: its limit now, and once reached, the bound that then holds, when it was
   * reached and the agents whose turns were open then.
   */
  const limits = new Map<string, { limit: number; bound?: number; reachedAt?: number; open?: Set<string> }>();
  const limitOf = (root: string) => {
    let entry = limits.get(root);
    if (entry === undefined) limits.set(root, (entry = { limit: modelCalls }));
    return entry;
  };
  llm.onAnswered((root, book) => {
    if (root.startsWith('plan:') || root === 'untagged') return;
    const entry = limitOf(root);
    if (entry.bound !== undefined || book.answered < entry.limit) return;
    entry.bound = entry.limit + agents.busyIn(root);
    entry.reachedAt = llm.now();
    entry.open = new Set([...agents.open.keys()].filter((agent) => agent.startsWith(`${root}/agent/`)));
  });
  return {
    name: 'budget',
    see(rune: Rune) {
      agents.see(rune);
      const edge = turnEdgeOf(rune);
      const entry = edge?.edge === 'start' ? limits.get(edge.root) : undefined;
      if (entry?.open !== undefined && rune.at <= entry.reachedAt! && !entry.open.has(edge!.agent)) {
        entry.open.add(edge!.agent);
        entry.bound! += 1;
      }
      if (rune.machine === 'conversation' && rune.event.type === 'budget_replenished') {
        const budget = (rune.event as { budget?: { modelCalls?: number } }).budget;
        if (budget !== undefined) {
          const entry: { limit: number; bound?: number; reachedAt?: number; open?: Set<string> } = { limit: budget.modelCalls ?? Number.POSITIVE_INFINITY };
          limits.set(rune.stream, entry);
          // A new limit below what was answered already is reached at once: the calls answered
          // before it are not an overrun of it, and the turns open now may finish their calls.
          const answered = llm.books.get(rune.stream)?.answered ?? 0;
          if (answered >= entry.limit) {
            entry.bound = answered + agents.busyIn(rune.stream);
            entry.reachedAt = llm.now();
            entry.open = new Set([...agents.open.keys()].filter((agent) => agent.startsWith(`${rune.stream}/agent/`)));
          }
        }
      }
      return undefined;
    },
    check() {
      const findings: Finding[] = [];
      for (const [root, book] of llm.books) {
        if (root.startsWith('plan:') || root === 'untagged') continue;
        const { limit, bound } = limitOf(root);
        if (book.answered > (bound ?? limit)) {
          findings.push({
            oracle: 'budget',
            message: `the model API answered ${book.answered} calls for ${root}'s agents (${book.answeredReact} of a ReAct loop); its modelCalls limit is ${limit}${bound === undefined ? '' : ` (${bound} with the turns open when it was reached)`}`,
            stream: root,
          });
        }
      }
      return findings;
    },
  };
};
