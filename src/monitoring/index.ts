export * from './logger.ts';
export * from './metrics.ts';
export * from './instrument-runtime.ts';
export * from './metrics-server.ts';
