import {
  context,
  createTraceState,
  isSpanContextValid,
  trace,
  TraceFlags,
  type Context,
  type SpanContext,
} from '@opentelemetry/api';

/**
 * W3C trace context as carried by HTTP headers and stored with a run (in its options): the
 * `traceparent` of the span the run continues, and its `tracestate` when there is one.
 */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
/** Longer than any tracestate the W3C format allows (32 members of at most 256 + 1 + 256 characters). */
const MAX_TRACESTATE = 512;

/**
 * A `traceparent` header as a (remote) span context, or undefined when it is not one: a strict
 * reading of the W3C format (version `ff` refused, zero ids refused, version 00 exactly 55
 * characters). A bad header is ignored, never an error.
 */
export function parseTraceparent(header: string | undefined, tracestate?: string): SpanContext | undefined {
  if (typeof header !== 'string' || header.length > 512) return undefined;
  const m = TRACEPARENT.exec(header.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [
    string,
    string,
    string,
    string,
    string,
    string | undefined,
  ];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  const sc: SpanContext = {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  if (!isSpanContextValid(sc)) return undefined;
  if (typeof tracestate === 'string' && tracestate.length > 0 && tracestate.length <= MAX_TRACESTATE) {
    const state = createTraceState(tracestate);
    if (state.serialize().length > 0) sc.traceState = state;
  }
  return sc;
}

/** The `traceparent` (and `tracestate`) of a span context. */
export function formatTraceparent(sc: SpanContext): TraceCarrier {
  const flags = (sc.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, '0');
  const state = sc.traceState?.serialize();
  return { traceparent: `00-${sc.traceId}-${sc.spanId}-${flags}`, ...(state ? { tracestate: state } : {}) };
}

/** A carrier read back (from a run's options): a context whose remote parent it names, or undefined. */
export function contextOf(carrier: unknown, base: Context = context.active()): Context | undefined {
  if (!carrier || typeof carrier !== 'object') return undefined;
  const c = carrier as Partial<TraceCarrier>;
  const sc = parseTraceparent(c.traceparent, c.tracestate);
  return sc ? trace.setSpanContext(base, sc) : undefined;
}

/**
 * The trace context of an incoming request: the active span's when an instrumentation (the OTel
 * SDK's HTTP instrumentation) made one current, else the request's `traceparent` and `tracestate`
 * headers when they are valid, else undefined.
 */
export function traceOfRequest(
  traceparent: string | undefined,
  tracestate: string | undefined,
): TraceCarrier | undefined {
  const active = trace.getSpanContext(context.active());
  if (active && isSpanContextValid(active)) return formatTraceparent(active);
  const sc = parseTraceparent(traceparent, tracestate);
  return sc ? formatTraceparent(sc) : undefined;
}
