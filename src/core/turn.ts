import { totalTokens, type UserMessage } from '../model/index.ts';
import type { AgentDefinition } from './agent.ts';
import type { EventDataMap, PendingCall, TurnEndReason, TurnError } from './events.ts';
import { userMessage } from './inbox.ts';
import { TurnNotOverError } from './sink.ts';
import { TurnStoppedByTool } from './served-result.ts';
import { runStep } from './step.ts';
import { finishOpenStep } from './tool-calls.ts';
import { HookFailure, SinkFailure, settingsRecord, TurnState } from './turn-state.ts';
import type { StepOutcome, TurnHandle, TurnOptions, TurnResult } from './turn-types.ts';

type TurnEnd = { reason: TurnEndReason; error?: TurnError; pending?: PendingCall[] };

function failure(e: unknown): TurnEnd {
  return {
    reason: 'failed',
    error:
      e instanceof SinkFailure
        ? { kind: 'sink', message: e.message }
        : e instanceof HookFailure
          ? { kind: 'hook', message: e.message }
          : e instanceof TurnStoppedByTool
            ? { kind: 'tool', code: e.code, message: e.message }
            : { kind: 'internal', message: e instanceof Error ? e.message : String(e) },
  };
}

/**
 * One turn of the agent loop: steps until nothing must be pushed forward now. The step is in
 * step.ts (its end: `endStep`, in step-end.ts), the model request in model-request.ts, tool calls in
 * tool-calls.ts; this file holds what happens between steps, and the turn's start and end.
 */
class TurnRunner {
  readonly t: TurnState;

  constructor(agent: AgentDefinition, options: TurnOptions) {
    this.t = new TurnState(agent, options);
  }

  async run(): Promise<TurnResult> {
    try {
      return await this.runToEnd();
    } finally {
      this.t.stopListening();
    }
  }

  private async runToEnd(): Promise<TurnResult> {
    const t = this.t;
    let end: TurnEnd;
    let outcome: StepOutcome | undefined;
    try {
      await t.emit(
        'turn/start',
        {
          agent: { name: t.agent.name, version: t.agent.version },
          model: { provider: t.model.provider, modelId: t.model.modelId },
          resumed: t.options.resume !== undefined,
        },
        { step: null },
      );
      if (t.options.input !== undefined) await this.addUser(userMessage(t.options.input), 'input');
      if (t.options.resume) {
        t.stepNo = t.options.resume.step;
        outcome = await finishOpenStep(t, t.options.resume);
      }
    } catch (e) {
      end = failure(e);
      await this.end(end);
      return this.result(end);
    }
    for (;;) {
      end = await this.steps(outcome);
      // The turn's end is a durable point; its sink may answer that input is waiting (TurnNotOverError):
      // then the turn goes on, and takes that input at its next step boundary.
      if (await this.end(end)) break;
      outcome = undefined;
    }
    return this.result(end);
  }

  /** Steps until the turn ends: after a step (`outcome`, if one just ended) or from a boundary. */
  private async steps(outcome: StepOutcome | undefined): Promise<TurnEnd> {
    const t = this.t;
    try {
      for (;;) {
        // After a step that ran tools, the turn goes on: nothing to decide (and no promise to make).
        if (outcome && outcome.kind !== 'tool-calls') {
          const end = await this.afterStep(outcome);
          if (end) return end;
        }
        const stop = await this.boundary();
        if (stop) return { reason: stop };
        outcome = await runStep(t);
      }
    } catch (e) {
      return failure(e);
    }
  }

  /** Records the turn's end; false when the sink says the turn is not over (see TurnNotOverError). */
  private async end(end: TurnEnd): Promise<boolean> {
    const t = this.t;
    const data: EventDataMap['turn/end'] = {
      reason: end.reason,
      steps: t.stepNo,
      usage: t.usage,
      cost: t.cost,
      ...(end.error ? { error: end.error } : {}),
      ...(end.pending ? { pending: end.pending } : {}),
    };
    try {
      // A durable point: the turn's end commits with everything still held.
      await t.emit('turn/end', data, { step: null, durable: true, checkpoint: t.checkpoint(t.stepNo) });
    } catch (e) {
      if (end.reason === 'completed' && e instanceof SinkFailure && e.cause instanceof TurnNotOverError) return false;
      // After a sink failure the sink may refuse this too; the result still tells the caller.
    }
    return true;
  }

  private result(end: TurnEnd): TurnResult {
    const t = this.t;
    t.carry();
    return {
      reason: end.reason,
      turn: t.turnNo,
      steps: t.stepNo,
      conversation: t.conversation,
      added: t.added,
      usage: t.usage,
      cost: t.cost,
      ...(end.error ? { error: end.error } : {}),
      ...(end.pending ? { pending: end.pending } : {}),
    };
  }

  private async addUser(m: UserMessage, via: 'input' | 'steer'): Promise<void> {
    await this.t.emit('user/message', { message: m, via });
    this.t.push(m);
  }

  /** Decides what follows a step; returns the end of the turn, if it ends. */
  private async afterStep(outcome: StepOutcome): Promise<TurnEnd | undefined> {
    const t = this.t;
    switch (outcome.kind) {
      case 'tool-calls':
        return undefined;
      case 'cancelled':
        return { reason: 'cancelled' };
      case 'failed':
        return { reason: 'failed', error: outcome.error };
      case 'suspended':
        return { reason: 'suspended', pending: outcome.pending };
      case 'interrupted': {
        if (t.turnCtl.signal.aborted) return { reason: 'cancelled' };
        const votes = await t.runHook('modelCallCancelled', (h) => h.modelCallCancelled!(t.boundaryContext()));
        return votes.includes('continue') ? undefined : { reason: 'cancelled' };
      }
      case 'final':
        if (t.inbox.hasSteering) return undefined;
        await t.runHook('turnStopping', (h) => h.turnStopping!(t.boundaryContext()));
        return t.inbox.hasSteering ? undefined : { reason: 'completed' };
    }
  }

  /** Everything that may change between steps, and only there. Returns a reason to stop, if any. */
  private async boundary(): Promise<TurnEndReason | undefined> {
    const t = this.t;
    if (t.turnCtl.signal.aborted) return 'cancelled';
    // Each part only when it has something to do: a boundary runs at every step.
    if (t.inbox.hasSteering) for (const m of t.inbox.takeSteering()) await this.addUser(m, 'steer');
    if (t.pendingConfig.length > 0) await this.applyConfig();
    if (t.hasHook('beforeStep')) await t.runHook('beforeStep', (h) => h.beforeStep!(t.boundaryContext()));
    // A hook may have steered or reconfigured: those belong to this boundary too.
    if (t.inbox.hasSteering) for (const m of t.inbox.takeSteering()) await this.addUser(m, 'steer');
    if (t.pendingConfig.length > 0) await this.applyConfig();
    if (t.turnCtl.signal.aborted) return 'cancelled';
    if (t.pauseRequested) return 'paused';

    const { limits } = t.agent;
    if (t.stepNo >= limits.maxSteps) return 'max_steps';
    if (limits.maxTokens !== undefined && totalTokens(t.usage) >= limits.maxTokens) return 'budget_exceeded';
    if (limits.maxCostUsd !== undefined && t.cost >= limits.maxCostUsd) return 'budget_exceeded';

    if (t.hasHook('compact')) await t.compact('threshold');
    return undefined;
  }

  private async applyConfig(): Promise<void> {
    const t = this.t;
    const changes = t.pendingConfig;
    if (changes.length === 0) return;
    t.pendingConfig = [];
    for (const c of changes) {
      const data: EventDataMap['config/change'] = {};
      if (c.model) {
        t.model = c.model;
        data.model = { provider: c.model.provider, modelId: c.model.modelId };
      }
      if (c.system !== undefined) {
        t.system = c.system;
        data.system = true;
      }
      if (c.tools) {
        t.tools = new Map(c.tools.map((x) => [x.name, x]));
        data.tools = c.tools.map((x) => x.name);
      }
      if (c.settings) {
        t.settings = c.settings;
        data.settings = settingsRecord(c.settings);
      }
      await t.emit('config/change', data);
    }
  }
}

/** Starts one turn. The handle controls it while it runs; `result` settles when it ends. */
export function startTurn(agent: AgentDefinition, options: TurnOptions): TurnHandle {
  const runner = new TurnRunner(agent, options);
  const t = runner.t;
  const result = runner.run();
  return {
    result,
    inbox: t.inbox,
    cancel: (reason) => t.turnCtl.abort(new DOMException(reason ?? 'turn cancelled', 'AbortError')),
    cancelModelCall: () => t.callCtl?.abort(new DOMException('model call cancelled', 'AbortError')),
    configure: (change) => void t.pendingConfig.push(change),
  };
}

/** Runs one turn to its end. */
export function runTurn(agent: AgentDefinition, options: TurnOptions): Promise<TurnResult> {
  return startTurn(agent, options).result;
}
