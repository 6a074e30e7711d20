import type { ModelMessage } from 'ai';
import { EMPTY, Observable, catchError, concat, defer, of } from 'rxjs';
import type { z } from 'zod';
import { MAX_TASK_TEXT, type AutonomyLoopEvent, type AutonomyLoopState } from '../../reducers/autonomy-loop/schema.js';
import { errorText } from '../../reducers/error-text.js';
import { describeIssues } from '../../reducers/validate.js';
import type { EpicCommand } from '../../streams/epic.js';
import type { ChainContext } from '../llm/provider-chain.js';
import type { ChainOutput, ModelRequest } from '../llm/model-types.js';

/** A model call that may emit breaker commands beside its parts: `chainCall$` over a chain, usually. */
export type StructuredCaller = (request: ModelRequest, context: ChainContext) => Observable<ChainOutput>;

/** How an answer's text is checked: its value, or why it is refused (told to the model when it is asked again). */
export type AnswerCheck<T> = (text: string) => { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/**
 * What {@link structuredAnswer$} emits: the calls' breaker commands, each refused answer that is
 * asked again (`attempt` counts from the first call, earlier ones included), then the answer or why there is none.
 */
export type StructuredOutput<T> =
  | { readonly type: 'command'; readonly command: EpicCommand }
  | { readonly type: 'refused'; readonly attempt: number; readonly error: string }
  | { readonly type: 'answer'; readonly value: T }
  | { readonly type: 'failed'; readonly reason: string };

/** Attempts made before (by a process that died): how many, and the last one's error. */
export interface EarlierAttempts {
  readonly attempts: number;
  readonly error: string;
}

/** The longest answer text read: a longer one is refused. */
export const MAX_ANSWER_CHARS = 1_000_000;

/**
 * The JSON value in a model's text: all of it, or inside a ```json fence, or from its first `{`
 * to its last `}` (models wrap JSON in prose). Throws a SyntaxError when there is none.
 */
export function jsonOfText(text: string): unknown {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(text)?.[1];
  const candidates = [text.trim(), fenced?.trim(), text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1)];
  let first: unknown;
  for (const candidate of candidates) {
    if (candidate === undefined || candidate === '') continue;
    try {
      return JSON.parse(candidate);
    } catch (error) {
      first ??= error;
    }
  }
  throw first ?? new SyntaxError('the answer is empty');
}

/** An {@link AnswerCheck} by a zod schema (then `refine`, for what a schema cannot say): the error names each failing field. */
export function schemaCheck<S extends z.ZodType>(schema: S, refine: (value: z.infer<S>) => string | undefined = () => undefined): AnswerCheck<z.infer<S>> {
  return (text) => {
    if (text.length > MAX_ANSWER_CHARS) return { ok: false, error: `the answer is ${text.length} characters; at most ${MAX_ANSWER_CHARS} are read` };
    let json: unknown;
    try {
      json = jsonOfText(text);
    } catch (error) {
      return { ok: false, error: `not JSON: ${errorText(error)}` };
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) return { ok: false, error: describeIssues(parsed.error.issues) };
    const problem = refine(parsed.data);
    return problem === undefined ? { ok: true, value: parsed.data } : { ok: false, error: problem };
  };
}

/**
 * Asks a model for a structured (JSON) answer and checks it: an answer that fails `check` (or a
 * call that fails) is `refused` and asked again, with the model's answer and the error in the
 * conversation, up to `maxAttempts` calls in all; then `failed` with the last error. The calls'
 * breaker commands are emitted as they come, for the caller to dispatch. `earlier` attempts (the
 * caller recorded their `refused`, and its process died) count toward `maxAttempts`.
 */
export function structuredAnswer$<T>(
  call: StructuredCaller,
  request: ModelRequest,
  check: AnswerCheck<T>,
  maxAttempts: number,
  context: ChainContext,
  earlier?: EarlierAttempts,
): Observable<StructuredOutput<T>> {
  const failed = (error: string): StructuredOutput<T> => ({ type: 'failed', reason: `no valid answer in ${maxAttempts} attempt${maxAttempts === 1 ? '' : 's'}: ${error}` });
  const attempt = (n: number, messages: readonly ModelMessage[]): Observable<StructuredOutput<T>> =>
    defer(() => {
      let text = '';
      let failure: string | undefined;
      const calling$ = new Observable<StructuredOutput<T>>((subscriber) =>
        call({ ...request, messages }, context).subscribe({
          next: (output) => {
            if (output.type === 'command') subscriber.next(output);
            else if (output.type === 'part' && output.part.type === 'text-delta') text += output.part.text;
          },
          error: (error: unknown) => subscriber.error(error),
          complete: () => subscriber.complete(),
        }),
      ).pipe(
        catchError((error: unknown) => {
          failure = `the model call failed: ${errorText(error)}`;
          return EMPTY;
        }),
      );
      const next$ = defer(() => {
        const checked = failure === undefined ? check(text) : ({ ok: false, error: failure } as const);
        if (checked.ok) return of<StructuredOutput<T>>({ type: 'answer', value: checked.value });
        if (n >= maxAttempts) return of(failed(checked.error));
        const retry: ModelMessage[] =
          failure === undefined
            ? [
                { role: 'assistant', content: text },
                { role: 'user', content: `That answer was refused: ${checked.error}. Answer again with the JSON only.` },
              ]
            : [];
        return concat(of<StructuredOutput<T>>({ type: 'refused', attempt: n, error: checked.error }), attempt(n + 1, [...messages, ...retry]));
      });
      return concat(calling$, next$);
    });
  const made = earlier?.attempts ?? 0;
  return made >= maxAttempts ? of(failed(earlier!.error)) : attempt(made + 1, request.messages);
}

/** The attempts the plan's log holds for `question`, if its refusals are for it (a process died asking it). */
export const earlierAttempts = (plan: AutonomyLoopState, question: string): EarlierAttempts | undefined =>
  plan.refused?.question === question ? { attempts: plan.refused.attempts, error: plan.refused.error } : undefined;

/** A refused answer as the plan's event (`plan.answer_refused`): the count survives a restart. */
export const refusedEvent = (question: string, error: string): AutonomyLoopEvent => ({
  type: 'answer_refused',
  question,
  error: error.length > MAX_TASK_TEXT ? `${error.slice(0, MAX_TASK_TEXT - 1)}…` : error,
});
