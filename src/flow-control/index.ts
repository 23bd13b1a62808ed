/** Provider flow control: limits by model, held in the store across processes (docs/flow-control.md). */
export * from './flow-control.ts';
export * from './model-limits.ts';
export type { Grant } from './gate.ts';
