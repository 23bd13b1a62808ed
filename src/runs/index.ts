export * from './lifecycle/run-status.ts';
export * from './lifecycle/index.ts';
export * from './resume.ts';
export * from './sink.ts';
export * from './execution.ts';
export * from './worker.ts';
export * from './runtime.ts';
export * from './subagent.ts';
export * from './observer.ts';
export * from '../core/clock.ts';
export * from './waits.ts';
export * from './webhooks/index.ts';
export * from './schedules.ts';
export { InvalidSendOptionError } from './send-options.ts';
export { FieldValidationError } from './field-validation-error.ts';
export { ArgumentsNotEditableError } from './arguments-not-editable-error.ts';
export { rerunLineage, type AgentOverrides, type RerunLineage } from './reruns/rerun-lineage.ts';
export type { RerunRequest } from './reruns/start-rerun.ts';
export type { OnMismatch, ToolPolicies, ToolPolicy } from './reruns/tool-policy.ts';
export { RerunRequestError } from './reruns/rerun-agent.ts';
export { EvalsApi } from './evals/evals-api.ts';
export { judgeScorer, textSimilarity, BUILT_IN_SCORERS, type Scorer, type ScoredItem } from './evals/scorers.ts';
export type { Outcome, FrozenRun, Decision } from './evals/frozen-run.ts';
export type {
  Candidate,
  CandidateInput,
  CandidateResults,
  ExperimentMode,
  ExperimentRequest,
  ExperimentResults,
  ExperimentSpec,
} from './evals/experiments.ts';
export type { DatasetRequest } from './evals/datasets.ts';
export type { BulkRerunRequest } from './evals/bulk-reruns.ts';
export type { RunFilter } from './evals/run-filter.ts';
export {
  pendingClientToolCalls,
  clientToolOutput,
  type ClientToolResult,
  type ClientToolSpec,
  type PendingClientToolCall,
} from './client-tools.ts';
export { QuotaExceededError } from './quotas/quota-exceeded-error.ts';
export { checkTenantQuotas, type QuotaOptions } from './quotas/quota-options.ts';
export { Quotas, type QuotaReport, type QuotaLine, type QuotaRefusal, type QuotaStop } from './quotas/quotas.ts';
export {
  Erasure,
  MIN_NEEDLE_LENGTH,
  MAX_NEEDLES,
  type ErasureActor,
  type ErasureReport,
  type ErasureResult,
} from './erasure/erasure.ts';
export type { ErasureParticipant, ErasureTarget } from './erasure/participant.ts';
