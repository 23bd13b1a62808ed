/**
 * The storage port: the only thing the layers above storage import. Backends (./sqlite) are
 * chosen where the program is put together: the CLI, the public entry point, tests.
 */
export * from './port.ts';
export * from './webhooks.ts';
export { hasNul, NUL_REFUSAL, refuseNul } from './plain-text.ts';
export type { CallbackRecord, SignalRecord, WaitStoreOps } from './wait-rows.ts';
export type { LimitAcquire, LimitGrant, LimitStoreOps } from './limit-rows.ts';
