/** The run state machine moved to lifecycle/run-status.ts (the run-status vocabulary); re-exported here for old imports. */
export {
  CLAIM_POLICY,
  canTransition,
  statusesLeadingTo,
  IllegalTransitionError,
  assertTransition,
} from './lifecycle/run-status.ts';
