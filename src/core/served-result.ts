/**
 * What a tool may return instead of running: a result it serves (a recorded one reused, or a mock),
 * logged as it is with its source; and what it may throw to end the turn as failed (a rerun whose
 * policy says a call without a recorded result fails it). Reruns (src/runs/reruns) wrap tools with both.
 */
import type { ToolOutput } from '../model/index.ts';

/** Where a tool call's result came from: the tool ran, a recorded result was reused, or a mock served. */
export type ToolResultSource = 'executed' | 'reused' | 'mocked';

const SERVED = Symbol.for('keel.served-result');

/** A result a tool serves without running: the output as it is logged, and where it came from. */
export interface ServedResult {
  readonly [SERVED]: true;
  readonly output: ToolOutput;
  readonly source: Exclude<ToolResultSource, 'executed'>;
}

/** Returned by a tool's execute: `output` becomes the call's result as it is (not wrapped as JSON), marked `source`. */
export function servedResult(output: ToolOutput, source: ServedResult['source']): ServedResult {
  return { [SERVED]: true, output, source };
}

export function isServedResult(value: unknown): value is ServedResult {
  return typeof value === 'object' && value !== null && (value as { [SERVED]?: unknown })[SERVED] === true;
}

/**
 * Thrown by a tool's execute to end the turn as failed (`turn/end` error kind `tool`, with `code`),
 * instead of giving the model an error result: the call gets a `cancelled` result when the run ends.
 */
export class TurnStoppedByTool extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = 'TurnStoppedByTool';
    this.code = code;
  }
}
