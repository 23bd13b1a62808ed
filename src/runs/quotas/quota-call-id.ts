/** The id of one model call of a run in the quota ledger (ADR-0043): its turn and step, the same on every attempt and recovery. */
export const quotaCallId = (runId: string, turn: number, step: number): string => `${runId}:${turn}:${step}`;
