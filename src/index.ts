/**
 * Keel's public library API. Layers, innermost first: model (one provider call),
 * core (steps and turns). Outer layers (session log, runs, server) build on these.
 */
export * from './model/index.ts';
export * from './core/index.ts';
