import { contentHash, promptHash, promptHashV1 } from '../core/index.ts';
import type { Message } from '../model/index.ts';
import type { SessionEvent } from './event-types.ts';
import type { SessionLog } from './log.ts';
import { contextProjection, fold, turnConversation, type ContextState } from './projections/index.ts';

export interface ReplayMismatch {
  seq: number;
  /** The id the request's assistant message was to have. */
  messageId: string;
  kind: 'context' | 'fingerprint' | 'content';
  detail: string;
}

export interface ReplayReport {
  sessionId: string;
  events: number;
  requests: number;
  mismatches: ReplayMismatch[];
  ok: boolean;
}

/**
 * The replay check: rebuilds every recorded model request from the log alone (the branch path
 * as it was at that point, compaction applied, opaque reasoning only from the request's own turn)
 * and compares it with the request header: the context ids in order, and the fingerprint of
 * system prompt, settings, tool schemas and every message. A mismatch means the log does not
 * explain that request.
 */
export async function verifyReplay(
  log: SessionLog,
  sessionId: string,
  options: { onProgress?: (events: number) => void } = {},
): Promise<ReplayReport> {
  const report: ReplayReport = { sessionId, events: 0, requests: 0, mismatches: [], ok: true };
  const content = new HeaderContent(log);
  const requests = recordedRequests(log, sessionId, {
    validate: true,
    onPage: (events) => {
      report.events = events;
      options.onProgress?.(events);
    },
  });
  for await (const r of requests) {
    report.requests++;
    await check(r.header, r.messages, content, report);
  }
  report.ok = report.mismatches.length === 0;
  return report;
}

/** A recorded model request rebuilt from the log: its header and the messages it sent. */
export interface RecordedRequest {
  header: SessionEvent<'request/header'>;
  /** What the loop held when it made the request: earlier turns portable, its own turn as produced. */
  messages: Message[];
}

/**
 * Every recorded model request of a session (of one run, with `runId`), rebuilt from the log
 * alone, in log order: the branch path as it was at that point, compaction applied, opaque
 * reasoning only from the request's own turn. What the replay check compares with each header,
 * and what a dataset freezes of a run (src/runs/evals).
 */
export async function* recordedRequests(
  log: SessionLog,
  sessionId: string,
  options: { runId?: string; untilSeq?: number; validate?: boolean; onPage?: (events: number) => void } = {},
): AsyncGenerator<RecordedRequest> {
  const session = await log.session(sessionId);
  const until = Math.min(options.untilSeq ?? session.lastSeq, session.lastSeq);
  const entries = new Map<string, SessionEvent>();
  let leaf: string | null = null;
  let state: ContextState = contextProjection.init();
  let stateLeaf: string | null = null;
  let events = 0;

  const rebuild = () => {
    const path: SessionEvent[] = [];
    for (let id = leaf; id; id = entries.get(id)?.parentId ?? null) {
      const e = entries.get(id);
      if (!e) break;
      path.push(e);
    }
    state = fold(contextProjection, path.reverse());
    stateLeaf = leaf;
  };

  for (let after = 0; after < until;) {
    const page = await log.read(sessionId, {
      afterSeq: after,
      untilSeq: until,
      limit: 1000,
      // The context as the run's model saw it: large tool results through the policy's view (ADR-0040).
      payloads: log.payloads.modelView,
      ...(options.validate !== undefined ? { validate: options.validate } : {}),
    });
    if (page.length === 0) break;
    for (const e of page) {
      events++;
      if (e.entry) {
        entries.set(e.id, e);
        if (stateLeaf === (e.parentId ?? null)) {
          contextProjection.apply(state, e);
          stateLeaf = e.id;
        }
        leaf = e.id;
      } else if (e.type === 'leaf/move') {
        leaf = e.data.entryId;
      } else if (e.type === 'request/header' && (options.runId === undefined || e.runId === options.runId)) {
        if (stateLeaf !== leaf) rebuild();
        yield { header: e as SessionEvent<'request/header'>, messages: turnConversation(state, e.turn ?? 0) };
      }
    }
    after = page.at(-1)!.seq;
    options.onPage?.(events);
  }
}

/** The system prompt and tool schemas a header refers to, read once per content hash. */
class HeaderContent {
  private readonly cache = new Map<string, string | undefined>();
  private readonly log: SessionLog;

  constructor(log: SessionLog) {
    this.log = log;
  }

  async load(hashes: ReadonlyArray<string | null>): Promise<void> {
    const wanted = hashes.filter((h): h is string => h !== null && !this.cache.has(h));
    if (wanted.length === 0) return;
    const found = await this.log.store.events.getBlobs(wanted);
    for (const h of wanted) this.cache.set(h, found.get(h));
  }

  /** The content hash of what is stored under `hash` (recomputed, so a tampered blob shows). */
  rehash(hash: string): string | undefined {
    const data = this.cache.get(hash);
    return data === undefined ? undefined : contentHash(data);
  }
}

async function check(
  h: SessionEvent<'request/header'>,
  messages: Message[],
  content: HeaderContent,
  report: ReplayReport,
): Promise<void> {
  const mismatch = (kind: ReplayMismatch['kind'], detail: string) =>
    report.mismatches.push({ seq: h.seq, messageId: h.data.messageId, kind, detail });
  const legacy = h.data.legacy;
  if (legacy) {
    // A header written before ADR-0008 lists every context id and fingerprints the v1 way.
    const ids = messages.map((m) => m.id);
    const recorded = legacy.context;
    if (ids.length !== recorded.length || ids.some((id, i) => id !== recorded[i])) {
      const at = ids.findIndex((id, i) => id !== recorded[i]);
      const i = at < 0 ? Math.min(ids.length, recorded.length) : at;
      return void mismatch(
        'context',
        `the log gives ${ids.length} context messages, the header lists ${recorded.length}; first difference at position ${i}: log ${ids[i] ?? '(none)'}, header ${recorded[i] ?? '(none)'}`,
      );
    }
    const hash = promptHashV1({ system: legacy.system, tools: legacy.tools, settings: h.data.settings, messages });
    if (hash !== h.data.promptHash) {
      mismatch(
        'fingerprint',
        `the request rebuilt from the log has fingerprint ${hash.slice(0, 12)}…, the header recorded ${h.data.promptHash.slice(0, 12)}…`,
      );
    }
    return;
  }
  const ctx = h.data.context;
  const first = messages[0]?.id ?? null;
  const last = messages.at(-1)?.id ?? null;
  if (messages.length !== ctx.messages || first !== ctx.first || last !== ctx.last) {
    return void mismatch(
      'context',
      `the log gives ${messages.length} context messages (${first ?? '(none)'} … ${last ?? '(none)'}), the header says ${ctx.messages} (${ctx.first ?? '(none)'} … ${ctx.last ?? '(none)'})`,
    );
  }
  await content.load([h.data.system, h.data.tools]);
  const system = h.data.system === null ? null : content.rehash(h.data.system);
  const tools = h.data.tools === null ? null : content.rehash(h.data.tools);
  if (system === undefined || tools === undefined) {
    return void mismatch(
      'content',
      `the ${system === undefined ? 'system prompt' : 'tool schemas'} this request refers to (${system === undefined ? h.data.system : h.data.tools}) is not stored`,
    );
  }
  const hash = promptHash({ system, tools, settings: h.data.settings }, messages);
  if (hash !== h.data.promptHash) {
    mismatch(
      'fingerprint',
      `the request rebuilt from the log has fingerprint ${hash.slice(0, 12)}…, the header recorded ${h.data.promptHash.slice(0, 12)}…`,
    );
  }
}
