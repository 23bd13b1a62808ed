import { HttpProblem } from './problems.ts';
import { z } from '@hono/zod-openapi';
import { hasNul, NUL_REFUSAL } from '../store/index.ts';
import type { SessionEvent } from '../session/index.ts';
import type { RunRecord, SessionRecord } from '../store/index.ts';
import { RUN_STATUS_ORDER } from '../runs/lifecycle/run-status.ts';
import type { Waiting } from '../runs/lifecycle/waiting.ts';
import { waitDetails } from '../runs/waits.ts';
import { rerunLineage } from '../runs/reruns/rerun-lineage.ts';

/** API payloads. Bodies are strict: unknown fields are refused, not ignored. */
export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string().optional(),
  })
  .catchall(z.unknown())
  .openapi('Problem');

export const JsonObjectSchema = z.record(z.string(), z.unknown());

export const SessionSchema = z
  .object({
    id: z.string(),
    title: z.string().nullable(),
    metadata: JsonObjectSchema,
    agent: z.string().nullable(),
    created_at: z.string().describe('ISO 8601'),
    last_seq: z.number().int(),
    leaf_id: z.string().nullable(),
    origin: z.object({ session_id: z.string(), entry_id: z.string() }).nullable(),
    archived_at: z.string().nullable(),
    erased_at: z
      .string()
      .nullable()
      .describe('When the session was erased: a tombstone (only listed with include_archived)'),
    in_archive_at: z
      .string()
      .nullable()
      .describe(
        'When retention moved its log to the archive store (reads answer session_in_archive until POST /v1/sessions/{id}/restore); not archived_at',
      ),
  })
  .openapi('Session');

export const RunSchema = z
  .object({
    id: z.string(),
    session_id: z.string(),
    parent_run_id: z.string().nullable(),
    child_run_ids: z.array(z.string()),
    rerun_of: z.string().nullable().describe('For a rerun: the run it re-runs (its reruns: GET /v1/runs?rerun_of=)'),
    rerun: z
      .object({
        of: z.object({ session_id: z.string(), run_id: z.string(), step: z.number().int() }),
        agent: z.object({ name: z.string(), version: z.string() }),
        overrides: JsonObjectSchema.nullable(),
        tools: JsonObjectSchema,
        message_replaced: z.boolean(),
      })
      .nullable()
      .describe(
        'For a rerun: its lineage (source session, run and step, agent, overrides, tool policies; docs/evals.md)',
      ),
    agent: z.object({ name: z.string(), version: z.string() }),
    agent_spec: JsonObjectSchema,
    status: z.enum(RUN_STATUS_ORDER),
    queued_behind: z
      .boolean()
      .describe(
        "Queued behind the session's active run (an enqueued message): it starts when that run and the runs queued before it have ended; its turn is numbered then",
      ),
    trigger_message_id: z.string().nullable(),
    turn: z.number().int().nullable(),
    created_at: z.string(),
    started_at: z.string().nullable(),
    ended_at: z.string().nullable(),
    attempt: z.number().int(),
    usage: JsonObjectSchema,
    cost: z.number(),
    error: JsonObjectSchema.nullable(),
    waiting: z
      .object({
        kind: z
          .enum(['approval', 'input', 'sleep', 'signal', 'quota'])
          .describe('quota: waiting_for_quota, no pending call; expires_at is when it tries again (ADR-0043)'),
        requests: z.array(
          z.object({
            approval_id: z.string(),
            tool_call_id: z.string(),
            tool: z.string(),
            arguments: z.unknown(),
            kind: z.enum(['approval', 'input', 'sleep', 'signal']),
            decided: z.boolean(),
            until: z.string().optional().describe('A sleep: when it wakes'),
            wake_on_steer: z.boolean().optional().describe('A sleep: a steering message wakes it early'),
            signal: z
              .string()
              .optional()
              .describe('A signal wait: the name to deliver (POST /v1/runs/{id}/signals/{name})'),
            schema: z.unknown().optional().describe('A signal wait: the JSON Schema of the payload'),
            client_tool: z
              .boolean()
              .optional()
              .describe('A client tool call: its output comes by POST /v1/runs/{id}/tool-results'),
            deadline: z.string().optional().describe('When this wait ends by itself'),
            on_deadline: z
              .unknown()
              .optional()
              .describe("What happens then: 'timed_out', 'wake', { deny } or { answer }"),
            outcome_unknown: z
              .object({ idempotency_key: z.string(), started_at: z.string().nullable() })
              .optional()
              .describe(
                'An approval asked because the call started before a crash and its outcome is unknown: approve runs it again with this idempotency key, deny tells the model it was not run again',
              ),
          }),
        ),
        expires_at: z
          .string()
          .nullable()
          .describe('The first deadline of what the run still waits for (a sleep: its wake-up)'),
        quota: z
          .object({
            scope: z.string().describe('tenant:<id> or key:<id>'),
            limit: z
              .string()
              .describe(
                'tokensPerDay, costPerDay, costPerMonth, concurrentRuns, or unavailable (the store did not answer)',
              ),
            max: z.number(),
            used: z.number(),
            reserved: z.number(),
          })
          .optional()
          .describe('A quota wait: the limit that refused the next model call, and what was charged to it then'),
      })
      .nullable(),
    lease: z.object({ owner: z.string(), expires_at: z.string() }).nullable(),
    cancel_requested: z.boolean(),
    pause_requested: z.boolean(),
    resume_cursor: z
      .object({ step: z.number().int(), seq: z.number().int() })
      .nullable()
      .describe(
        'Where the run continues if it is interrupted: its last step boundary (steps done, and the session seq of the step end or turn end that recorded it)',
      ),
  })
  .openapi('Run');

export const EventSchema = z
  .object({
    id: z.string(),
    session_id: z.string(),
    seq: z.number().int(),
    type: z.string(),
    v: z.number().int(),
    time: z.string(),
    run_id: z.string().optional(),
    turn: z.number().int().optional(),
    step: z.number().int().optional(),
    entry: z.boolean(),
    parent_id: z.string().optional(),
    data: z.unknown(),
  })
  .openapi('Event');

/**
 * Limits of request bodies beyond the byte limit (1 MiB; imports 64 MiB) and the nesting limit
 * (64): documented in docs/api.md, each refused with a 400 `validation` problem naming the field.
 */
export const LIMITS = {
  /** Ids and names sent in a body (entry ids, agents, tool call ids). */
  id: 200,
  title: 500,
  /** Keys of a session's metadata, and the length of each key. */
  metadataKeys: 64,
  metadataKey: 200,
  /** A session's metadata as JSON. */
  metadataBytes: 16_384,
  /** Parts of one message's content. */
  parts: 100,
  /** A denial's reason, a fork's summary. */
  reason: 2000,
  summary: 100_000,
} as const;

/** Text a store keeps as text (ids, names, titles, URLs): never the NUL character (store/plain-text.ts). */
export const plainText = (max: number, min = 0) =>
  z
    .string()
    .min(min)
    .max(max)
    .refine((v) => !hasNul(v), NUL_REFUSAL);
export const Id = plainText(LIMITS.id, 1);
const Title = plainText(LIMITS.title);
const Metadata = JsonObjectSchema.refine(
  (m) => Object.keys(m).length <= LIMITS.metadataKeys,
  `at most ${LIMITS.metadataKeys} keys`,
)
  .refine(
    (m) => Object.keys(m).every((k) => k.length <= LIMITS.metadataKey),
    `keys of at most ${LIMITS.metadataKey} characters`,
  )
  .refine(
    (m) => Buffer.byteLength(JSON.stringify(m)) <= LIMITS.metadataBytes,
    `at most ${LIMITS.metadataBytes} bytes as JSON`,
  );

const TextPart = z.strictObject({ type: z.literal('text'), text: z.string() });
const FilePart = z.strictObject({
  type: z.literal('file'),
  media_type: z.string().max(LIMITS.id),
  data: z.string().describe('base64, or an http(s) URL'),
  filename: z.string().max(LIMITS.title).optional(),
});
export const ContentSchema = z
  .union([
    z.string().min(1),
    z
      .array(z.union([TextPart, FilePart]))
      .min(1)
      .max(LIMITS.parts),
  ])
  .openapi('Content');

export const CreateSessionBody = z.strictObject({
  agent: Id.optional(),
  title: Title.optional(),
  metadata: Metadata.optional(),
});

export const ClientToolSchema = z
  .strictObject({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'a tool name: 1 to 64 letters, digits, _ or -'),
    description: z.string().max(4096).optional(),
    parameters: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("The JSON Schema of the tool's arguments (an object schema)"),
  })
  .openapi('ClientTool');

export const ToolResultsBody = z.strictObject({
  results: z
    .array(
      z.strictObject({
        tool_call_id: Id,
        output: z
          .unknown()
          .refine((v) => v !== undefined, 'output is required')
          .describe('Text, or any JSON value'),
        is_error: z.boolean().optional().describe('The call failed in the client: the model sees an error'),
      }),
    )
    .min(1)
    .max(128),
});

export const SendMessageBody = z.strictObject({
  content: ContentSchema,
  if_busy: z.enum(['reject', 'enqueue', 'steer', 'interrupt']).default('reject'),
  agent: Id.optional(),
  timeout_ms: z.number().int().positive().optional(),
  wait_timeout_ms: z.number().int().positive().optional(),
  client_tools: z
    .array(ClientToolSchema)
    .max(128)
    .optional()
    .describe('Tools the client executes itself: a call of one waits for its output (POST /v1/runs/{id}/tool-results)'),
});

export const ForkBody = z.strictObject({
  entry_id: Id,
  into: z.enum(['branch', 'session']),
  summary: z.string().max(LIMITS.summary).optional().describe('A summary of the abandoned path (branch only)'),
  title: Title.optional(),
});

export const LeafBody = z.strictObject({ entry_id: Id.nullable() });
export const CompactBody = z.strictObject({ keep_recent_tokens: z.number().int().positive().optional() });
export const SteerBody = z.strictObject({ content: ContentSchema });
export const InputBody = z.strictObject({
  answers: z.unknown().refine((v) => v !== undefined, 'answers is required'),
  tool_call_id: Id.optional(),
});
export const ApprovalBody = z.strictObject({
  decision: z.enum(['approve', 'deny']),
  arguments: z.unknown().optional(),
  reason: z.string().max(LIMITS.reason).optional(),
});

/**
 * Every list pages the same way: send a page's `next_cursor` as `cursor` for the next page
 * (`after` is the older name of `cursor`, still accepted).
 */
export const Cursor = z.object({
  cursor: z.string().optional().describe('The `next_cursor` of the previous page'),
  after: z.string().optional().describe('Deprecated: the older name of `cursor`'),
  limit: z.coerce.number().int().min(1).max(1000).default(50),
});

/** The cursor a list request sent, under either name (refused when they disagree). */
export function cursorOf(q: { cursor?: string | undefined; after?: string | undefined }): string | undefined {
  if (q.cursor !== undefined && q.after !== undefined && q.cursor !== q.after) {
    throw new HttpProblem(
      'validation',
      'send the cursor once: `cursor` (or its older name `after`), not both with different values',
    );
  }
  return q.cursor ?? q.after;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function sessionJson(s: SessionRecord) {
  return {
    id: s.id,
    title: s.title,
    metadata: s.metadata,
    agent: s.agent,
    created_at: iso(s.createdAt)!,
    last_seq: s.lastSeq,
    leaf_id: s.leafId,
    origin: s.origin ? { session_id: s.origin.sessionId, entry_id: s.origin.entryId } : null,
    archived_at: iso(s.archivedAt),
    erased_at: iso(s.erasedAt),
    in_archive_at: iso(s.inArchiveAt),
  };
}

/** A quota wait as the run row stores it (runs/quotas/quotas.ts: QuotaRefusal). */
type QuotaWaitJson = { scope: string; limit: string; max: number; used: number; reserved: number };

export function runJson(
  r: RunRecord,
  children: readonly string[],
  resume: { step: number; seq: number } | null = null,
) {
  const w = r.waiting as unknown as Waiting | null;
  return {
    id: r.id,
    session_id: r.sessionId,
    parent_run_id: r.parentRunId,
    child_run_ids: [...children],
    rerun_of: r.rerunOf,
    rerun: lineageJson(r),
    agent: r.agent,
    agent_spec: r.agentSpec,
    status: r.status,
    queued_behind: r.queuedBehind,
    trigger_message_id: r.triggerMessageId,
    turn: r.turn,
    created_at: iso(r.createdAt)!,
    started_at: iso(r.startedAt),
    ended_at: iso(r.endedAt),
    attempt: r.attempt,
    usage: r.usage,
    cost: r.cost,
    error: r.error,
    waiting: w
      ? {
          kind: w.kind,
          // An approval is identified by the tool call it is about.
          requests: w.calls.map((c) => ({
            approval_id: c.toolCallId,
            tool_call_id: c.toolCallId,
            tool: c.toolName,
            arguments: c.input,
            kind: c.kind,
            decided: w.decisions[c.toolCallId] !== undefined,
            ...waitDetails(c),
            ...(c.unknownOutcome
              ? {
                  outcome_unknown: {
                    idempotency_key: c.unknownOutcome.idempotencyKey,
                    started_at: iso(c.unknownOutcome.startedAt ?? null),
                  },
                }
              : {}),
          })),
          expires_at: iso(w.expiresAt),
          ...(w.quota ? { quota: w.quota as unknown as QuotaWaitJson } : {}),
        }
      : null,
    lease: r.lease ? { owner: r.lease.owner, expires_at: iso(r.lease.expiresAt)! } : null,
    cancel_requested: r.cancelRequested,
    pause_requested: r.pauseRequested,
    resume_cursor: resume,
  };
}

export function eventJson(e: SessionEvent) {
  return {
    id: e.id,
    session_id: e.sessionId,
    seq: e.seq,
    type: e.type,
    v: e.v,
    time: new Date(e.time).toISOString(),
    ...(e.runId !== undefined ? { run_id: e.runId } : {}),
    ...(e.turn !== undefined ? { turn: e.turn } : {}),
    ...(e.step !== undefined ? { step: e.step } : {}),
    entry: e.entry,
    ...(e.parentId !== undefined ? { parent_id: e.parentId } : {}),
    data: e.data,
  };
}

/** API content (snake_case file parts) to Keel user input. */
export function toUserInput(content: z.infer<typeof ContentSchema>) {
  if (typeof content === 'string') return content;
  return content.map((p) =>
    p.type === 'text'
      ? p
      : {
          type: 'file' as const,
          mediaType: p.media_type,
          data: p.data,
          ...(p.filename ? { filename: p.filename } : {}),
        },
  );
}

/** A rerun's lineage as the API shows it (see RerunLineage), or null. */
function lineageJson(r: RunRecord) {
  const l = rerunLineage(r);
  if (!l) return null;
  return {
    of: { session_id: l.of.sessionId, run_id: l.of.runId, step: l.of.step },
    agent: l.agent,
    overrides: (l.overrides as unknown as Record<string, unknown> | undefined) ?? null,
    tools: l.tools as unknown as Record<string, unknown>,
    message_replaced: l.messageReplaced === true,
  };
}
