import { readFileSync } from 'node:fs';
import { trace, type Tracer } from '@opentelemetry/api';

const version = (() => {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
      .version;
  } catch {
    return undefined;
  }
})();

/**
 * Keel's tracer, from the global tracer provider: a no-op unless an OpenTelemetry SDK registered
 * one. Asked for each time (it is cheap), so a provider registered (or replaced) later is used.
 */
export function keelTracer(): Tracer {
  return trace.getTracer('keel', version);
}

export interface TelemetryOptions {
  /**
   * Record message contents on spans: the model's output messages, tool arguments and results,
   * the user input a run starts with. Off by default (they may hold personal data); also switched
   * on by `KEEL_OTEL_RECORD_CONTENT=1` or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
   */
  recordContent?: boolean;
}

/** Whether contents are recorded: the option when given, else the environment. */
export function recordsContent(o: TelemetryOptions | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  if (o?.recordContent !== undefined) return o.recordContent;
  const on = (v: string | undefined) => v !== undefined && ['1', 'true', 'yes', 'on'].includes(v.trim().toLowerCase());
  return on(env.KEEL_OTEL_RECORD_CONTENT) || on(env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT);
}
