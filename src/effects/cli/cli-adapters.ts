import type { AgentCliAdapter } from './cli-adapter.js';
import { acpCliAdapter } from './acp-adapter.js';
import { ndjsonCliAdapter } from './ndjson-adapter.js';

/** The adapter of each protocol a configured CLI may speak (the configuration's `protocol`). */
export const cliAdapters: Readonly<Record<'ndjson' | 'acp', AgentCliAdapter>> = { ndjson: ndjsonCliAdapter, acp: acpCliAdapter };
