/**
 * The tool results a source run recorded, from its step `from` on, indexed by tool name and
 * canonical arguments: what a rerun serves when it reuses them. Built from the source session's
 * log, which nothing rewrites, so a recovered rerun builds the same index and serves the same.
 */
import { canonicalJson, type Tool } from '../../core/index.ts';
import type { JsonValue, ToolOutput } from '../../model/index.ts';
import type { SessionEvent } from '../../session/index.ts';

export interface RecordedCall {
  toolName: string;
  input: JsonValue;
  step: number;
  output: ToolOutput;
}

export class RecordedResults {
  private readonly byTool = new Map<string, RecordedCall[]>();

  /** The source run's calls with a result at or after step `from` (in log order). */
  constructor(events: readonly SessionEvent[], from: number) {
    const calls = new Map<string, { toolName: string; input: JsonValue; step: number }>();
    for (const e of events) {
      // A question (ask_user) is a call too: its answer is its result.
      if ((e.type === 'tool/call' || e.type === 'user/question') && (e.step ?? 0) >= from)
        calls.set(e.data.toolCallId, { toolName: e.data.toolName, input: e.data.input, step: e.step ?? 0 });
      else if (e.type === 'tool/result') {
        const call = calls.get(e.data.toolCallId);
        // A result the run gave a call because it stopped (cancelled, outcome unknown) says nothing of the tool.
        if (!call || (e.data.output.type === 'error' && STOPPED.has(e.data.output.code))) continue;
        const list = this.byTool.get(call.toolName) ?? [];
        list.push({ ...call, output: e.data.output });
        this.byTool.set(call.toolName, list);
      }
    }
  }

  /**
   * The recorded result of a call of `tool` with these arguments (compared as the tool parses
   * them, in canonical JSON): the one recorded at the same step if there is one, else the first.
   */
  find(tool: Pick<Tool, 'name' | 'input'>, input: unknown, step: number): RecordedCall | undefined {
    const key = canonicalJson(input);
    const same = (this.byTool.get(tool.name) ?? []).filter((c) => canonicalJson(parsed(tool, c.input)) === key);
    return same.find((c) => c.step === step) ?? same[0];
  }

  /** Any recorded result of `tool` (the same step's first): what `onMismatch: 'serve'` serves. */
  anyOf(toolName: string, step: number): RecordedCall | undefined {
    const all = this.byTool.get(toolName) ?? [];
    return all.find((c) => c.step === step) ?? all[0];
  }

  /** How many recorded results there are (all tools). */
  get size(): number {
    let n = 0;
    for (const l of this.byTool.values()) n += l.length;
    return n;
  }
}

const STOPPED = new Set(['cancelled', 'outcome_unknown']);

/** The recorded arguments as the tool parses them now (defaults filled), or as recorded when they no longer parse. */
function parsed(tool: Pick<Tool, 'input'>, input: JsonValue): unknown {
  const r = tool.input.safeParse(input);
  return r.success ? r.data : input;
}
