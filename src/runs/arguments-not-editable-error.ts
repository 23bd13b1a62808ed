import { StoreError } from '../store/index.ts';

/**
 * An approval with edited arguments for a call whose outcome is unknown (ADR-0018): approving it
 * runs the call again exactly as it ran (its recorded input, its idempotency key), so arguments
 * cannot be edited. HTTP 400 `arguments_not_editable`.
 */
export class ArgumentsNotEditableError extends StoreError {
  readonly runId: string;
  readonly toolCallId: string;
  constructor(runId: string, toolCallId: string) {
    super(
      'arguments_not_editable',
      `approval ${toolCallId} of run ${runId} is for a call whose outcome is unknown: approving it runs the call again with its recorded arguments and idempotency key, so they cannot be edited; approve without arguments, or deny it`,
    );
    this.name = 'ArgumentsNotEditableError';
    this.runId = runId;
    this.toolCallId = toolCallId;
  }
}
