/**
 * The storage port: the only thing the layers above storage import. Backends (./sqlite) are
 * chosen where the program is put together: the CLI, the public entry point, tests.
 */
export * from './port.ts';
