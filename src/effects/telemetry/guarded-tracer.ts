import {
  INVALID_SPAN_CONTEXT,
  trace,
  type Attributes,
  type AttributeValue,
  type Context,
  type Exception,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type Tracer,
} from '@opentelemetry/api';

/**
 * A span whose every call is guarded: what the SDK behind it throws (a span processor's `onEnd`,
 * an exporter called in line) goes to `failed`, and the caller carries on as if it had worked.
 * So the bookkeeping of open spans stays right whatever the tracer does.
 */
class GuardedSpan implements Span {
  constructor(
    private readonly span: Span,
    private readonly failed: (error: unknown) => void,
  ) {}

  #guard(call: () => unknown): this {
    try {
      call();
    } catch (error) {
      this.failed(error);
    }
    return this;
  }

  spanContext(): SpanContext {
    try {
      return this.span.spanContext();
    } catch (error) {
      this.failed(error);
      return INVALID_SPAN_CONTEXT;
    }
  }
  setAttribute(key: string, value: AttributeValue): this {
    return this.#guard(() => this.span.setAttribute(key, value));
  }
  setAttributes(attributes: Attributes): this {
    return this.#guard(() => this.span.setAttributes(attributes));
  }
  addEvent(name: string, attributesOrStartTime?: Attributes | TimeInput, startTime?: TimeInput): this {
    return this.#guard(() => this.span.addEvent(name, attributesOrStartTime, startTime));
  }
  addLink(link: Link): this {
    return this.#guard(() => this.span.addLink(link));
  }
  addLinks(links: Link[]): this {
    return this.#guard(() => this.span.addLinks(links));
  }
  setStatus(status: SpanStatus): this {
    return this.#guard(() => this.span.setStatus(status));
  }
  updateName(name: string): this {
    return this.#guard(() => this.span.updateName(name));
  }
  end(endTime?: TimeInput): void {
    this.#guard(() => this.span.end(endTime));
  }
  isRecording(): boolean {
    try {
      return this.span.isRecording();
    } catch (error) {
      this.failed(error);
      return false;
    }
  }
  recordException(exception: Exception, time?: TimeInput): void {
    this.#guard(() => this.span.recordException(exception, time));
  }
}

/**
 * `tracer`, guarded: a `startSpan` that throws gives a non-recording span (so children of it are
 * roots), and every span it gives is a {@link GuardedSpan}. Each failure goes to `failed`. Only
 * `startSpan` is offered: the tracing epic never makes a span active.
 */
export function guardedTracer(tracer: Tracer, failed: (error: unknown) => void): Pick<Tracer, 'startSpan'> {
  return {
    startSpan(name: string, options?: SpanOptions, context?: Context): Span {
      try {
        return new GuardedSpan(tracer.startSpan(name, options, context), failed);
      } catch (error) {
        failed(error);
        return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
      }
    },
  };
}
