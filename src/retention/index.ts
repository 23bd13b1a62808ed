/** Retention and archives (docs/operations.md). */
export * from './policy.ts';
export * from './retention.ts';
export * from './session-archive.ts';
export * from './retention-config.ts';
