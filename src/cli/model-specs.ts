import { DEMO_SYSTEM } from '../effects/llm/demo-model.js';
import { BUILTIN_TOOL_NAMES } from '../effects/tools/builtin-tools.js';
import { ServerConfig, ServerConfigError, type ModelConfig } from '../server/config/server-config.js';

/** The role of the agent `runestream serve` runs when no configuration file is given. */
export const DEMO_ROLE = 'demo';

/** The longest chain the flags and `RUNESTREAM_MODELS` may name (a configuration file's chains have the same limit). */
const MAX_SPECS = 16;

/**
 * The configuration of `runestream serve` without a file: one agent, role `demo`, with the
 * built-in tools and the demo's system prompt, on a chain of the models `specs` name, in order.
 * A spec is `demo` (the offline demo model), `<model>@<baseURL>` (an OpenAI-compatible server), or
 * `<model>` (at `OPENAI_BASE_URL`). `OPENAI_API_KEY`, when set, is every OpenAI-compatible
 * model's key. No spec at all is `demo`. Throws a {@link ServerConfigError} naming `source`.
 */
export function configFromModelSpecs(specs: readonly string[], source: string, env: NodeJS.ProcessEnv): ServerConfig {
  const fail = (message: string): never => {
    throw new ServerConfigError(source, [{ path: '', message }]);
  };
  if (specs.length > MAX_SPECS) fail(`${specs.length} models; a chain has at most ${MAX_SPECS}`);
  const models: Record<string, ModelConfig> = {};
  for (const spec of specs.length === 0 ? ['demo'] : specs) {
    const model = modelOf(spec.trim(), env) ?? fail(`"${spec}" has no base URL: write <model>@<baseURL> (e.g. llama3.2@http://localhost:11434/v1) or set OPENAI_BASE_URL`);
    models[uniqueName(nameOf(spec.trim()), models)] = model;
  }
  const names = Object.keys(models);
  const chain = names.length === 1 ? names[0]! : 'models';
  const parsed = ServerConfig.safeParse({
    models,
    chains: names.length === 1 ? {} : { [chain]: { models: names } },
    agents: { [DEMO_ROLE]: { model: chain, tools: [...BUILTIN_TOOL_NAMES], system: DEMO_SYSTEM } },
    defaultRole: DEMO_ROLE,
  });
  if (!parsed.success) fail(parsed.error.issues.map((issue) => issue.message).join('; '));
  return parsed.data!;
}

/** The model a spec names, or `undefined` for a model id with no base URL anywhere. */
function modelOf(spec: string, env: NodeJS.ProcessEnv): ModelConfig | undefined {
  if (spec === 'demo') return { type: 'demo' };
  const at = spec.lastIndexOf('@http');
  const model = at === -1 ? spec : spec.slice(0, at);
  const baseURL = at === -1 ? env.OPENAI_BASE_URL || undefined : spec.slice(at + 1);
  if (baseURL === undefined) return undefined;
  return { type: 'openai-compatible', baseURL, model, ...(env.OPENAI_API_KEY ? { apiKeyEnv: 'OPENAI_API_KEY' } : {}) };
}

/** A spec's model id as a configuration name (letters, digits, `_-.`): `llama3.2:8b@http://...` is `llama3.2_8b`. */
const nameOf = (spec: string): string => {
  const at = spec.lastIndexOf('@http');
  return (
    (at === -1 ? spec : spec.slice(0, at))
      .replace(/[^A-Za-z0-9_.-]/g, '_')
      .replace(/^[^A-Za-z0-9]+/, '')
      .slice(0, 60) || 'model'
  );
};

/** `name`, or `name-2`, `name-3`, ... if the chain has it already (one model at two servers). */
const uniqueName = (name: string, taken: Record<string, unknown>): string => {
  let unique = name;
  for (let n = 2; unique in taken; n++) unique = `${name}-${n}`;
  return unique;
};
