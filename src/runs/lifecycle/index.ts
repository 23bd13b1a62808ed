/**
 * The run lifecycle's public face: the run-status vocabulary, the shapes of its transactions and
 * RunLifecycle, which opens them. The transaction bodies are imported from their own files.
 */
export * from './run-status.ts';
export * from './types.ts';
export * from './idempotency.ts';
export { agentSpec, specWithMcpTools, usageOf } from './run-spec.ts';
export {
  expiresAtOf,
  kindOf,
  newWaiting,
  payloadIssues,
  statusOf,
  type DeadlineAction,
  type Decision,
  type Waiting,
  type WaitingCall,
} from './waiting.ts';
export { applyDecisions } from './apply-decisions.ts';
export { MAX_SIGNALS_PER_RUN } from './deliver-signal.ts';
export type { DecisionInput } from './decide.ts';
export type { RunEnd } from './end-turn.ts';
export type { TransitionOptions } from './transition.ts';
export { RunLifecycle } from './run-lifecycle.ts';
