import type { LanguageModel } from 'ai';
import type { Budget } from '../../reducers/budget.js';
import { chainOf } from '../agent/agent-roles.js';
import { chainCall$, type ProviderChain } from '../llm/provider-chain.js';
import type { StructuredCaller } from './structured-answer.js';

/**
 * A model of the loop: one model or a provider chain with fallback (called through `chainCall$`),
 * or a {@link StructuredCaller} of your own, called as it is: an Observable of the model's parts
 * (a test's scripted one runs under virtual time, with no runtime behind it).
 */
export type AutonomyModel = LanguageModel | ProviderChain | StructuredCaller;

/** Options of `autonomyEpics`, with their defaults. */
export interface AutonomyOptions {
  /** The planner's model (see {@link AutonomyModel}): it answers a plan as JSON. */
  readonly planner: AutonomyModel;
  /** The critic's model, which reviews the results. Default: the planner's. */
  readonly critic?: AutonomyModel;
  /**
   * The roles a task may name as its `ownerRole`, with what each does (shown to the planner). A
   * plan naming another role is refused. Default: none listed, any role accepted (the agents' own
   * configuration, `agentEpics({ agents })`, decides what an agent of that role is).
   */
  readonly roles?: Readonly<Record<string, { readonly description?: string }>>;
  /** How many tasks of a plan run at once. Default 4. */
  readonly parallelism?: number;
  /** Whether a plan starts as soon as it is made (`auto_start`); else it waits for a client's `plan_approved`. Default false. */
  readonly autoStart?: boolean;
  /** Planner (and critic) calls per plan (or verdict) before the loop stops with why. Default 3. */
  readonly maxPlannerAttempts?: number;
  /** How many times a task may run, its first run included: the critic retries a failed task only below it. Default 3. */
  readonly maxTaskAttempts?: number;
  /** How many times the critic may send a plan back to the planner. Default 2. */
  readonly maxReplans?: number;
  /** How long a blocked plan waits for an operator's `retry_task` before it stops (`unresolvable`). Default 600,000 ms. */
  readonly blockedTimeoutMs?: number;
  /**
   * How long an executing plan may go with no rune of its own and none of its tasks' agents (their
   * turns, tool calls, sub-agents) before it stops as stalled (`unresolvable`, reason `stalled: ...`):
   * no plan hangs silently. A task waiting on a person (a tool call awaiting approval) is not
   * stalled. Default 600,000 ms (10 minutes).
   */
  readonly executingStallMs?: number;
  /** Limits on the conversation's usage (all its agents' turns) while a plan executes: over one, `budget_exhausted`. Default: none. */
  readonly budget?: Budget;
}

/** {@link AutonomyOptions} with every default applied, the models as callers. */
export interface ResolvedAutonomyOptions {
  readonly plan: StructuredCaller;
  readonly review: StructuredCaller;
  readonly roles: Readonly<Record<string, { readonly description?: string }>> | undefined;
  readonly parallelism: number;
  readonly autoStart: boolean;
  readonly maxPlannerAttempts: number;
  readonly maxTaskAttempts: number;
  readonly maxReplans: number;
  readonly blockedTimeoutMs: number;
  readonly executingStallMs: number;
  readonly budget: Budget | undefined;
}

const positive = (name: string, value: number, integer = true): number => {
  if (!(value > 0) || (integer && !Number.isInteger(value)))
    throw new TypeError(`autonomyEpics: "${name}" must be a positive ${integer ? 'integer' : 'number'}, got ${String(value)}`);
  return value;
};

/** Checks the options (a TypeError names the bad one) and applies the defaults. */
export function resolveAutonomyOptions(options: AutonomyOptions): ResolvedAutonomyOptions {
  const { planner, critic = planner, roles, parallelism = 4, autoStart = false, maxPlannerAttempts = 3, maxTaskAttempts = 3, maxReplans = 2 } = options;
  const { blockedTimeoutMs = 600_000, executingStallMs = 600_000, budget } = options;
  if (planner === undefined) throw new TypeError('autonomyEpics: "planner" (a model or a provider chain) is required');
  const caller = (model: AutonomyModel): StructuredCaller => {
    if (typeof model === 'function') return model;
    const chain = chainOf(model);
    return (request, context) => chainCall$(chain, request, context);
  };
  if (maxReplans !== 0) positive('maxReplans', maxReplans);
  return {
    plan: caller(planner),
    review: caller(critic),
    roles: roles === undefined || Object.keys(roles).length === 0 ? undefined : roles,
    parallelism: positive('parallelism', parallelism),
    autoStart,
    maxPlannerAttempts: positive('maxPlannerAttempts', maxPlannerAttempts),
    maxTaskAttempts: positive('maxTaskAttempts', maxTaskAttempts),
    maxReplans,
    blockedTimeoutMs: positive('blockedTimeoutMs', blockedTimeoutMs, false),
    executingStallMs: positive('executingStallMs', executingStallMs, false),
    budget,
  };
}
