export * from './projection.ts';
export * from './context.ts';
export * from './transcript.ts';
export * from './developer.ts';
export * from './stats.ts';
export * from './run-comparison.ts';
