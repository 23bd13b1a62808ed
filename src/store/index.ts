/**
 * The storage port: the only thing the layers above storage import. Backends (./sqlite, ./postgres)
 * are chosen where the program is put together: the CLI, the public entry point, tests.
 */
export * from './port/index.ts';
export { hasNul, NUL_REFUSAL, refuseNul } from './plain-text.ts';
export { PAUSED_FOR_ERASED_TENANT } from './schedule-rows.ts';
