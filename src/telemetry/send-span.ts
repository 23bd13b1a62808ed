import { context, isSpanContextValid, SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import { GenAI, Keel } from './genai-attributes.ts';
import { contextOf, formatTraceparent, type TraceCarrier } from './trace-context.ts';
import { keelTracer } from './tracer.ts';

/**
 * The span of a message taken by a session (`keel.send {agent}`): a child of the caller's trace
 * context (the HTTP request's `traceparent`, or the active span), or the root of a new trace. Its
 * context is what the run stores and every execution of the run continues. Without an SDK it
 * records nothing and its context is the caller's (so a request's `traceparent` is still stored,
 * for workers that do trace), or none.
 */
export class SendSpan {
  private readonly span: Span;
  /** What the run stores: the context its executions continue. */
  readonly carrier: TraceCarrier | undefined;

  constructor(agent: string, sessionId: string, incoming: TraceCarrier | undefined) {
    const parent = contextOf(incoming) ?? context.active();
    this.span = keelTracer().startSpan(`keel.send ${agent}`, { kind: SpanKind.INTERNAL }, parent);
    const sc = this.span.spanContext();
    this.carrier = isSpanContextValid(sc) ? formatTraceparent(sc) : undefined;
    if (this.span.isRecording()) {
      this.span.setAttributes({
        [GenAI.agentName]: agent,
        [GenAI.conversationId]: sessionId,
        [Keel.sessionId]: sessionId,
      });
    }
  }

  /** The message was taken: it created, enqueued behind, or steered this run. */
  sent(outcome: string, runId: string): void {
    if (this.span.isRecording()) this.span.setAttributes({ [Keel.sendOutcome]: outcome, [Keel.runId]: runId });
    this.span.end();
  }

  failed(e: unknown): void {
    if (this.span.isRecording()) {
      const t = e as { code?: unknown; name?: unknown; message?: unknown };
      this.span.setAttribute(
        GenAI.errorType,
        typeof t?.code === 'string' ? t.code : typeof t?.name === 'string' ? t.name : 'Error',
      );
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: String(t?.message ?? e) });
    }
    this.span.end();
  }
}
