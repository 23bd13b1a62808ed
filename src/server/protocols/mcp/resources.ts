/**
 * Keel's sessions, their transcripts and runs as MCP resources, for the caller's tenant only:
 *
 *   keel://sessions/{session_id}             the session (JSON, as GET /v1/sessions/{id}, with its runs)
 *   keel://sessions/{session_id}/transcript  its transcript (JSON, as GET /v1/sessions/{id}/transcript, and as text)
 *   keel://runs/{run_id}                     a run: status, final answer, what it waits for (JSON)
 *
 * `resources/list` lists the tenant's sessions (newest last, paged); the templates name the rest.
 * Another tenant's ids, and ids that do not exist, are not found (-32002, the protocol's code).
 */
import type { Context } from 'hono';
import type {
  ListResourcesResult,
  ListResourceTemplatesResult,
  ReadResourceResult,
} from '@modelcontextprotocol/sdk/types.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { TranscriptItem } from '../../../session/index.ts';
import { NotFoundError, StoreError, type SessionRecord } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor, sessionFor } from '../../lookups.ts';
import { sessionJson } from '../../schemas.ts';
import { runOutput } from './run-results.ts';

/** The protocol's code for a resource that is not there. */
export const RESOURCE_NOT_FOUND = -32002;

/** Sessions a `resources/list` page holds. */
export const RESOURCES_PAGE = 50;

const JSON_TYPE = 'application/json';

export const sessionUri = (id: string) => `keel://sessions/${encodeURIComponent(id)}`;
export const transcriptUri = (id: string) => `${sessionUri(id)}/transcript`;
export const runUri = (id: string) => `keel://runs/${encodeURIComponent(id)}`;

export const RESOURCE_TEMPLATES: ListResourceTemplatesResult['resourceTemplates'] = [
  {
    uriTemplate: 'keel://sessions/{session_id}',
    name: 'session',
    title: 'A Keel session',
    description: 'The session, with its runs (the session_id a tool call returns)',
    mimeType: JSON_TYPE,
  },
  {
    uriTemplate: 'keel://sessions/{session_id}/transcript',
    name: 'transcript',
    title: "A Keel session's transcript",
    description: 'What was said in the session: as JSON, and as text',
    mimeType: JSON_TYPE,
  },
  {
    uriTemplate: 'keel://runs/{run_id}',
    name: 'run',
    title: 'A Keel run',
    description: 'A run (a tool call, a task): its status, its final answer, what it waits for',
    mimeType: JSON_TYPE,
  },
];

function resourceOf(s: SessionRecord): ListResourcesResult['resources'][number] {
  return {
    uri: sessionUri(s.id),
    name: s.id,
    title: s.title ?? `Session ${s.id}`,
    mimeType: JSON_TYPE,
    ...(s.agent ? { description: `A session with ${s.agent}` } : {}),
  };
}

/** The tenant's sessions, a page at a time (the cursor is the last session id of a page). */
export async function listResources(
  ctx: AppContext,
  c: Context<AppEnv>,
  cursor: string | undefined,
): Promise<ListResourcesResult> {
  const page = await ctx.rt.sessions.list({
    tenant: c.get('tenant'),
    limit: RESOURCES_PAGE + 1,
    ...(cursor ? { after: cursor } : {}),
  });
  const sessions = page.slice(0, RESOURCES_PAGE);
  return {
    resources: sessions.map(resourceOf),
    ...(page.length > RESOURCES_PAGE ? { nextCursor: sessions.at(-1)!.id } : {}),
  };
}

/** The transcript as plain text: who said what, in order. */
function transcriptText(items: readonly TranscriptItem[]): string {
  return items
    .flatMap((i) => {
      switch (i.kind) {
        case 'user':
          return [`user: ${i.text}`];
        case 'assistant': {
          const tools = i.tools.map((t) => `[${t.toolName}: ${t.status}]`).join(' ');
          const text = [i.text, tools].filter((s) => s !== '').join('\n');
          return text === '' ? [] : [`assistant: ${text}`];
        }
        case 'compaction':
          return [`(earlier conversation, summarized: ${i.summary})`];
        case 'branch':
          return [`(another branch, summarized: ${i.summary})`];
      }
    })
    .join('\n\n');
}

const notFound = (uri: string) => new McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`, { uri });

/** Reads a resource of the caller's tenant. */
export async function readResource(ctx: AppContext, c: Context<AppEnv>, uri: string): Promise<ReadResourceResult> {
  const { rt } = ctx;
  const json = (value: unknown) => ({ uri, mimeType: JSON_TYPE, text: JSON.stringify(value, null, 2) });
  const m = /^keel:\/\/(sessions|runs)\/([^/]+)(\/transcript)?$/.exec(uri);
  if (!m || (m[1] === 'runs' && m[3])) throw notFound(uri);
  let id: string;
  try {
    id = decodeURIComponent(m[2]!);
  } catch {
    throw notFound(uri);
  }
  try {
    if (m[1] === 'runs') {
      const run = await runFor(ctx, c, id);
      const error = run.error as { message?: unknown } | null;
      return {
        contents: [
          json({
            ...(await runOutput(rt.sessions.log, run)),
            created_at: new Date(run.createdAt).toISOString(),
            ended_at: run.endedAt === null ? null : new Date(run.endedAt).toISOString(),
            error: typeof error?.message === 'string' ? error.message : null,
            usage: run.usage,
            session_uri: sessionUri(run.sessionId),
          }),
        ],
      };
    }
    const session = await sessionFor(ctx, c, id);
    if (m[3]) {
      const items = await rt.sessions.transcript(session.id);
      return { contents: [json({ items }), { uri, mimeType: 'text/plain', text: transcriptText(items) }] };
    }
    const runs = await rt.runs.list({ sessionId: session.id, limit: 1000 });
    return {
      contents: [
        json({
          ...sessionJson(session),
          transcript_uri: transcriptUri(session.id),
          runs: runs.map((r) => ({
            id: r.id,
            status: r.status,
            agent: `${r.agent.name}@${r.agent.version}`,
            uri: runUri(r.id),
          })),
        }),
      ],
    };
  } catch (e) {
    if (e instanceof NotFoundError || (e instanceof StoreError && e.code === 'session_erased')) throw notFound(uri);
    throw e;
  }
}
