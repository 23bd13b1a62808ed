/**
 * MCP tasks (protocol 2025-11-25, the SDK's experimental tasks) over Keel's runs: a task is a run
 * and its id is the run's id. Nothing is kept beside the run, so a task survives restarts and any
 * server process answers for it. The store is made per request, for the caller's tenant: another
 * tenant's runs are not found.
 *
 * The SDK answers `tasks/get`, `tasks/list` and `tasks/cancel` through this store; `tasks/result`
 * is Keel's own (mcp-server.ts), since it follows the run and asks its approvals and questions.
 */
import type { Context } from 'hono';
import type { CreateTaskOptions, TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import type { Task } from '@modelcontextprotocol/sdk/experimental/tasks/types.js';
import type { Result } from '@modelcontextprotocol/sdk/types.js';
import { NotFoundError, StoreError, type RunRecord } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor } from '../../lookups.ts';
import { callResult, taskOf } from './run-results.ts';

/** Tasks a `tasks/list` page holds. */
export const TASKS_PAGE = 50;

export class RunTasks implements TaskStore {
  private readonly ctx: AppContext;
  private readonly c: Context<AppEnv>;

  constructor(ctx: AppContext, c: Context<AppEnv>) {
    this.ctx = ctx;
    this.c = c;
  }

  /** The caller's run of that id, or undefined (none, another tenant's, an erased session's). */
  async find(id: string): Promise<RunRecord | undefined> {
    try {
      return await runFor(this.ctx, this.c, id);
    } catch (e) {
      if (e instanceof NotFoundError || (e instanceof StoreError && e.code === 'session_erased')) return undefined;
      throw e;
    }
  }

  /** Tasks are made by `tools/call` with a `task` (a new run), never by the SDK. */
  createTask(_params: CreateTaskOptions): Promise<Task> {
    return Promise.reject(new Error('a Keel task is made by tools/call with a task: it is the run the call starts'));
  }

  async getTask(taskId: string): Promise<Task | null> {
    const run = await this.find(taskId);
    return run ? taskOf(run) : null;
  }

  /** A run's result is its log: nothing is stored beside it. */
  storeTaskResult(): Promise<void> {
    return Promise.reject(new Error("a Keel task's result is its run's"));
  }

  async getTaskResult(taskId: string): Promise<Result> {
    const run = await this.find(taskId);
    if (!run) throw new Error(`Task not found: ${taskId}`);
    return callResult(this.ctx.rt.sessions.log, run);
  }

  /** Only a cancel comes from outside (`tasks/cancel`): it cancels the run. A run sets its other statuses itself. */
  async updateTaskStatus(taskId: string, status: Task['status'], statusMessage?: string): Promise<void> {
    if (status !== 'cancelled') throw new Error(`a Keel task's status is its run's: it cannot be set to ${status}`);
    const run = await this.find(taskId);
    if (!run) throw new Error(`Task not found: ${taskId}`);
    await this.ctx.rt.runs.cancel(run.id, {
      graceMs: this.ctx.options.cancelGraceMs,
      reason: statusMessage ? `MCP tasks/cancel: ${statusMessage}` : 'MCP tasks/cancel',
    });
  }

  /** The tenant's runs, oldest first, a page at a time (the cursor is the last run id of a page). */
  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const page = await this.ctx.rt.runs.list({
      tenant: this.c.get('tenant'),
      limit: TASKS_PAGE + 1,
      ...(cursor ? { after: cursor } : {}),
    });
    const runs = page.slice(0, TASKS_PAGE);
    return {
      tasks: runs.map(taskOf),
      ...(page.length > TASKS_PAGE ? { nextCursor: runs.at(-1)!.id } : {}),
    };
  }
}
