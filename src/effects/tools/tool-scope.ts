import type { Observable } from 'rxjs';
import type { EpicContext } from '../../streams/epic.js';

/**
 * Which tools the call on a stream may run, beyond their being in the registry: why `toolName`
 * is not one of the caller's tools (an agent calling another role's tool), or `undefined` if it
 * is. A refused call needs no approval and ends with an `execution_error` carrying the reason;
 * its tool never runs. Emits once, then completes.
 */
export type ToolScope = (stream: string, toolName: string, context: EpicContext) => Observable<string | undefined>;
