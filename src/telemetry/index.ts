export * from './genai-attributes.ts';
export * from './run-spans.ts';
export * from './send-span.ts';
export * from './trace-context.ts';
export * from './tracer.ts';
