/**
 * The lookups routes share: a session or a run of the caller's tenant (404 otherwise), a run as
 * JSON with its children and resume cursor, and the answer an earlier attempt of a message recorded.
 */
import type { Context } from 'hono';
import type { RecordedSend } from '../runs/index.ts';
import { NotFoundError, sessionInArchive, StoreError, type RunRecord, type SessionRecord } from '../store/index.ts';
import type { AppContext, AppEnv } from './context.ts';
import { runJson } from './schemas.ts';

/**
 * The session, if it exists and belongs to the caller's tenant: another tenant's ids answer 404.
 * One whose log is in the archive store answers 409 `session_in_archive`, unless `inArchive` (its erasure).
 */
export async function sessionFor(
  ctx: AppContext,
  c: Context<AppEnv>,
  id: string,
  o: { inArchive?: boolean } = {},
): Promise<SessionRecord> {
  const s = await ctx.rt.sessions.find(id);
  if (!s || s.tenant !== c.get('tenant')) throw new NotFoundError('session', id);
  if (s.erasedAt !== null) throw new StoreError('session_erased', `session ${id} was erased`);
  if (s.inArchiveAt !== null && !o.inArchive) throw sessionInArchive(id);
  return s;
}

/** The run, if its session belongs to the caller's tenant. */
export async function runFor(ctx: AppContext, c: Context<AppEnv>, id: string): Promise<RunRecord> {
  const run = await ctx.rt.runs.find(id);
  if (!run) throw new NotFoundError('run', id);
  await sessionFor(ctx, c, run.sessionId).catch((e: unknown) => {
    // The run of an erased session is gone with it; anyone else's is not found.
    if (e instanceof StoreError && e.code === 'session_erased')
      throw new StoreError('session_erased', `run ${id} belonged to session ${run.sessionId}, which was erased`);
    throw new NotFoundError('run', id);
  });
  return run;
}

/** A run as JSON: with its children's ids and its resume cursor. */
export async function runJsonFor(ctx: AppContext, run: Parameters<typeof runJson>[0]) {
  const [children, resume] = await Promise.all([
    ctx.rt.runs.list({ parentRunId: run.id, limit: 1000 }),
    ctx.rt.runs.resumeCursor(run.id),
  ]);
  return runJson(
    run,
    children.map((r) => r.id),
    resume,
  );
}

/**
 * The answer to a message (a send or a steer) that an earlier attempt with the same
 * Idempotency-Key had accepted but never answered (the server failed in between); undefined when
 * there was no such attempt.
 */
export async function recordedMessage(
  ctx: AppContext,
  c: Context<AppEnv>,
): Promise<
  { outcome: RecordedSend['outcome']; message: { id: string }; run: Awaited<ReturnType<typeof runJsonFor>> } | undefined
> {
  const recorded = c.get('recordedEffect');
  if (recorded === undefined) return undefined;
  const effect = JSON.parse(recorded) as RecordedSend;
  const run = await ctx.rt.runs.find(effect.run_id);
  if (!run) throw new NotFoundError('run', effect.run_id);
  return { outcome: effect.outcome, message: { id: effect.message_id }, run: await runJsonFor(ctx, run) };
}

/** A page of runs as JSON: `page` was read with one more than `limit`, which only says whether there is a next page. */
export async function runsPage(ctx: AppContext, page: readonly RunRecord[], limit: number) {
  const data = page.slice(0, limit);
  return {
    data: await Promise.all(data.map((r) => runJsonFor(ctx, r))),
    next_cursor: page.length > limit ? data.at(-1)!.id : null,
  };
}
