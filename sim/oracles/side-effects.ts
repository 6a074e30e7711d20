import type { Rune } from '../../src/reducers/rune.js';
import type { FakeTools } from '../fake-tools.js';
import type { Finding, Oracle } from './oracle.js';

/** The nonce the fake model puts in a call's arguments (`{"text":"n…"}`). */
const NONCE = /"text":"(n[0-9a-f]+)"/;

/** A tool call as the log shows it: where it lives, its tool, and how many times it was claimed. */
interface LoggedCall {
  readonly key: string;
  readonly tool: string;
  claims: number;
}

/**
 * Side effects counted by the tools themselves: a tool that is not `rerunSafe` runs at most once
 * per call, a `rerunSafe` one at most once per claim, and none runs for a call never claimed. A
 * call is found by the nonce of its arguments: a `tool-call` stream's spawn, or a tool call a ReAct
 * loop observed.
 */
export const sideEffectsOracle = (tools: FakeTools): Oracle => {
  const byNonce = new Map<string, LoggedCall>();
  const byKey = new Map<string, LoggedCall>();
  const record = (key: string, tool: string, args: unknown): void => {
    const nonce = NONCE.exec(JSON.stringify(args ?? null))?.[1];
    if (nonce === undefined || byKey.has(key)) return;
    const call = { key, tool, claims: 0 };
    byNonce.set(nonce, call);
    byKey.set(key, call);
  };
  return {
    name: 'side effects',
    see(rune: Rune) {
      const event = rune.event as Record<string, any>;
      if (rune.machine === 'tool-call' && rune.seq === 1) record(rune.stream, event.input?.toolName, event.input?.arguments);
      if (rune.machine === 'react-agent' && event.type === 're-act-observed' && event.observation?.type === 'continue-re-act') {
        for (const [id, request] of Object.entries(event.observation.toolCalls as Record<string, { name?: string; toolName?: string; arguments?: unknown; args?: unknown }>)) {
          record(`${rune.stream}#${id}`, request.name ?? request.toolName ?? '?', request);
        }
      }
      if (rune.kind === 'tool.claimed') {
        const key = rune.machine === 'react-agent' ? `${rune.stream}#${event.callId ?? event.toolCallId}` : rune.stream;
        const call = byKey.get(key);
        if (call !== undefined) call.claims++;
      }
      return undefined;
    },
    check() {
      const findings: Finding[] = [];
      for (const [tool, book] of tools.executions) {
        for (const [nonce, runs] of book) {
          const call = byNonce.get(nonce);
          if (call === undefined) continue; // arguments the model made but no call the log shows yet
          const allowed = tools.rerunSafe.has(tool) ? call.claims : Math.min(1, call.claims);
          if (runs > allowed) {
            findings.push({
              oracle: 'side effects',
              message: `tool "${tool}" ran ${runs} times for the call ${call.key} (nonce ${nonce}), which was claimed ${call.claims} times; at most ${allowed} ${tools.rerunSafe.has(tool) ? '(rerunSafe: once per claim)' : '(once per call, and only once claimed)'}`,
              stream: call.key.split('#')[0]!,
            });
          }
        }
      }
      return findings;
    },
  };
};
