export * from './state.ts';
export * from './book.ts';
export * from './resume.ts';
export * from './sink.ts';
export * from './execution.ts';
export * from './worker.ts';
export * from './runtime.ts';
export * from './subagent.ts';
