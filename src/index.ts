/**
 * Keel's public library API. Layers, innermost first: model (one provider call),
 * core (steps and turns), store (the storage port and its backends), session (the event log
 * and its projections). Outer layers (runs, server) build on these.
 */
export * from './model/index.ts';
export * from './core/index.ts';
export * from './store/index.ts';
export * from './store/sqlite/index.ts';
export * from './store/postgres/index.ts';
export * from './session/index.ts';
export * from './runs/index.ts';
export * from './mcp/index.ts';
export * from './archive/index.ts';
export * from './retention/index.ts';
export * from './config/index.ts';
export * from './monitoring/index.ts';
export {
  FlowControl,
  limitKeyFor,
  type FlowControlObserver,
  type FlowControlOptions,
  type ModelLimit,
  type ModelLimits,
  type Priority,
} from './flow-control/index.ts';
