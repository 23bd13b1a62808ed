import { z } from 'zod';
import { newId } from '../core/index.ts';
import {
  hasNul,
  NotFoundError,
  NUL_REFUSAL,
  StoreError,
  type BlobInfo,
  type EventDraft,
  type NewBlob,
  type SessionRecord,
  type StoreOps,
} from '../store/index.ts';
import { mapBlobs } from './blob-store.ts';
import { blobHash, contentRefsOf as fieldRefsOf, inflateBlobs } from './blobs.ts';
import { largeRefsOf, restorePayloads } from './large-payloads.ts';
import type { SessionLog } from './log.ts';

/** Every blob a stored event needs: its fields' and header's (blobs.ts), and its large payloads'. */
function contentRefsOf(type: string, v: number, data: unknown): string[] {
  const refs = fieldRefsOf(type, v, data);
  for (const r of largeRefsOf(type, data)) if (!refs.includes(r.$blob)) refs.push(r.$blob);
  return refs;
}

/**
 * Versioned JSONL export of a session, exactly as stored (events with blob references, and each
 * blob once, before its first use), so an import restores the very same log.
 *
 *   {"kind":"keel.session","version":1,"session":{...}}
 *   {"kind":"blob","hash":"sha256:…","data":"…"}
 *   {"kind":"blob","hash":"sha256:…","data":"…","mediaType":"image/png","encoding":"base64"}  (a large payload's, ADR-0040)
 *   {"kind":"event","id":"…","seq":1,"type":"session/created",...}
 */
export const EXPORT_FORMAT = 'keel.session';
export const EXPORT_VERSION = 1;

/** Text the store keeps as text: never the NUL character (see store/plain-text.ts). */
const plainText = () => z.string().refine((v) => !hasNul(v), NUL_REFUSAL);

const headerLine = z.strictObject({
  kind: z.literal(EXPORT_FORMAT),
  version: z.number().int(),
  session: z.strictObject({
    id: plainText().min(1),
    createdAt: z.number(),
    title: plainText().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    agent: plainText().nullable(),
    origin: z.strictObject({ sessionId: plainText(), entryId: plainText() }).nullable(),
    archivedAt: z.number().nullable(),
    lastSeq: z.number().int().nonnegative(),
    leafId: plainText().nullable(),
  }),
});

const blobLine = z.strictObject({
  kind: z.literal('blob'),
  hash: z.string(),
  data: z.string(),
  mediaType: plainText().optional(),
  encoding: z.literal('base64').optional(),
});

const eventLine = z.strictObject({
  kind: z.literal('event'),
  id: plainText().min(1),
  seq: z.number().int().positive(),
  type: plainText().min(1),
  v: z.number().int().positive(),
  time: z.number(),
  runId: plainText().optional(),
  turn: z.number().int().optional(),
  step: z.number().int().optional(),
  entry: z.boolean(),
  parentId: plainText().optional(),
  ignorable: z.boolean(),
  data: z.unknown(),
});

export async function* exportSession(log: SessionLog, sessionId: string): AsyncGenerator<string> {
  const s = await log.session(sessionId);
  const header: z.infer<typeof headerLine> = {
    kind: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    session: {
      id: s.id,
      createdAt: s.createdAt,
      title: s.title,
      metadata: s.metadata,
      agent: s.agent,
      origin: s.origin,
      archivedAt: s.archivedAt,
      lastSeq: s.lastSeq,
      leafId: s.leafId,
    },
  };
  yield JSON.stringify(header);
  const written = new Set<string>();
  for (let after = 0; after < s.lastSeq;) {
    const page = await log.store.events.read(sessionId, { afterSeq: after, untilSeq: s.lastSeq, limit: 1000 });
    if (page.length === 0) break;
    const wanted = [...new Set(page.flatMap((e) => contentRefsOf(e.type, e.v, e.data)))].filter((h) => !written.has(h));
    // Large payloads from where the log keeps them (the database, or the store configured instead).
    const source = log.blobs();
    const blobs = wanted.length > 0 ? await source.get(wanted) : new Map<string, string>();
    const infos = wanted.length > 0 ? await source.info(wanted) : new Map<string, BlobInfo>();
    for (const e of page) {
      for (const h of contentRefsOf(e.type, e.v, e.data)) {
        if (written.has(h)) continue;
        const data = blobs.get(h);
        if (data === undefined)
          throw new StoreError('missing_blob', `event #${e.seq} refers to blob ${h}, which is not stored`);
        written.add(h);
        const info = infos.get(h);
        yield JSON.stringify({
          kind: 'blob',
          hash: h,
          data,
          ...(info?.mediaType ? { mediaType: info.mediaType } : {}),
          ...(info?.encoding ? { encoding: info.encoding } : {}),
        });
      }
      const { sessionId: _s, ...rest } = e;
      yield JSON.stringify({ kind: 'event', ...rest });
    }
    after = page.at(-1)!.seq;
  }
}

export interface ImportProblem {
  line: number;
  message: string;
}

export class ImportError extends Error {
  readonly code = 'invalid_import';
  readonly problems: ImportProblem[];
  constructor(problems: ImportProblem[]) {
    const shown = problems
      .slice(0, 10)
      .map((p) => `  line ${p.line}: ${p.message}`)
      .join('\n');
    super(
      `import refused, nothing was written (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${shown}${problems.length > 10 ? '\n  …' : ''}`,
    );
    this.name = 'ImportError';
    this.problems = problems;
  }
}

/**
 * Lines of the input: a whole text; an iterable of lines (strings: each is one or more whole
 * lines); or raw bytes (a file stream without an encoding), where a line may span chunks.
 */
async function* linesOf(input: string | Iterable<string> | AsyncIterable<string | Uint8Array>): AsyncGenerator<string> {
  if (typeof input === 'string') {
    yield* input.split('\n');
    return;
  }
  const decoder = new TextDecoder();
  let rest = '';
  for await (const chunk of input as AsyncIterable<string | Uint8Array>) {
    if (typeof chunk === 'string') {
      yield* chunk.split('\n');
      continue;
    }
    const lines = (rest + decoder.decode(chunk, { stream: true })).split('\n');
    rest = lines.pop()!;
    yield* lines;
  }
  rest += decoder.decode();
  if (rest !== '') yield rest;
}

const MAX_PROBLEMS = 100;

export interface ImportOptions {
  onProgress?: (lines: number) => void;
  /** The tenant the session belongs to here (not the one it was exported from). Default `default`. */
  tenant?: string;
  /**
   * `new` (the default): the session gets a new id, so an export imports even where it came from;
   * its `origin` records the session (and the leaf) it was imported from. Its events keep their
   * ids, which are unique within a session: every reference in the log stays exact, and the
   * replay check still verifies every request. `keep`: the export's session id, refused
   * (`conflict`) when a session with it exists here. `restore`: the export's ids, into the session
   * of that id, which must be in an archive store (retention, `inArchiveAt`): its row stays, its
   * events come back; `within` is where the caller clears its archive mark.
   */
  ids?: 'new' | 'keep' | 'restore';
  /** Runs in the importing transaction with the new session (see `Sessions.create`). */
  within?: (tx: StoreOps, session: SessionRecord) => Promise<void>;
}

/**
 * Imports a session export. Every line is checked first (format, seq order, tree references,
 * blob hashes, each event's schema); any problem refuses the whole import with line numbers,
 * and nothing is written. `onProgress` is told how many lines were read.
 */
export async function importSession(
  log: SessionLog,
  input: string | Iterable<string> | AsyncIterable<string | Uint8Array>,
  options: ImportOptions = {},
): Promise<SessionRecord> {
  const problems: ImportProblem[] = [];
  const problem = (line: number, message: string) => {
    if (problems.length < MAX_PROBLEMS) problems.push({ line, message });
  };
  let header: z.infer<typeof headerLine> | undefined;
  const blobs = new Map<string, string>();
  const blobTypes = new Map<string, Pick<NewBlob, 'mediaType' | 'encoding'>>();
  const entries = new Set<string>();
  const ids = new Set<string>();
  const drafts: EventDraft[] = [];
  let leaf: string | null = null;
  let lineNo = 0;
  // The previous event line's seq (undefined after an unreadable line, which may have been an event):
  // each seq is checked against its predecessor, so one gap is one problem, not one per later line.
  let prevSeq: number | undefined = 0;
  // Blobs whose line was refused: that line is the problem, not every event that uses the blob.
  const refused = new Set<string>();

  for await (const raw of linesOf(input)) {
    lineNo++;
    if (lineNo % 1000 === 0) options.onProgress?.(lineNo);
    if (raw.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      problem(lineNo, 'not valid JSON');
      prevSeq = undefined;
      continue;
    }
    const kind = (value as { kind?: unknown } | null)?.kind;
    if (!header) {
      const h = headerLine.safeParse(value);
      if (!h.success) {
        problem(lineNo, `the first line must be a ${EXPORT_FORMAT} header: ${z.prettifyError(h.error)}`);
        break;
      }
      if (h.data.version > EXPORT_VERSION) {
        problem(lineNo, `export format version ${h.data.version} is newer than this Keel reads (${EXPORT_VERSION})`);
        break;
      }
      header = h.data;
      continue;
    }
    if (kind === 'blob') {
      const b = blobLine.safeParse(value);
      if (!b.success) problem(lineNo, `bad blob line: ${z.prettifyError(b.error)}`);
      else if (blobHash(b.data.data) !== b.data.hash) {
        problem(lineNo, `blob content does not match its hash ${b.data.hash}`);
        refused.add(b.data.hash);
      } else {
        blobs.set(b.data.hash, b.data.data);
        if (b.data.mediaType !== undefined)
          blobTypes.set(b.data.hash, {
            mediaType: b.data.mediaType,
            ...(b.data.encoding ? { encoding: b.data.encoding } : {}),
          });
      }
      continue;
    }
    const p = eventLine.safeParse(value);
    if (!p.success) {
      problem(
        lineNo,
        kind === 'event' ? `bad event line: ${z.prettifyError(p.error)}` : `unknown line kind ${JSON.stringify(kind)}`,
      );
      prevSeq = undefined;
      continue;
    }
    const e = p.data;
    if (prevSeq !== undefined && e.seq !== prevSeq + 1)
      problem(lineNo, `seq ${e.seq} where ${prevSeq + 1} was expected (seqs must be 1, 2, 3, … with no gap)`);
    prevSeq = e.seq;
    if (ids.has(e.id)) problem(lineNo, `duplicate event id ${e.id}`);
    ids.add(e.id);
    if (e.parentId !== undefined && !entries.has(e.parentId))
      problem(lineNo, `parent ${e.parentId} is not an earlier entry of this session`);
    if (e.parentId !== undefined && !e.entry) problem(lineNo, 'only conversation entries have a parent');

    let leafTo: string | null | undefined;
    const usesRefused = contentRefsOf(e.type, e.v, e.data).some((h) => refused.has(h));
    try {
      const missing = contentRefsOf(e.type, e.v, e.data).filter((h) => !blobs.has(h) && !refused.has(h));
      if (missing.length > 0) throw new Error(`refers to blob ${missing[0]}, which no earlier line provides`);
      const bytes = Buffer.byteLength(JSON.stringify(e.data) ?? '');
      if (bytes > log.payloads.maxEventBytes)
        throw new Error(`an event of ${bytes} bytes is over the limit of ${log.payloads.maxEventBytes} bytes`);
      const [data] = usesRefused
        ? []
        : await restorePayloads([{ type: e.type, data: inflateBlobs(e.data, blobs) }], 'whole', mapBlobs(blobs));
      const decoded = usesRefused
        ? undefined
        : log.registry.upcast({ type: e.type, v: e.v, seq: e.seq, ignorable: e.ignorable, data });
      const def = log.registry.get(e.type);
      if (decoded && def) {
        if (def.entry !== e.entry)
          throw new Error(`a ${e.type} event ${def.entry ? 'is' : 'is not'} a conversation entry`);
        if (def.leafOf) {
          leafTo = (def.leafOf as (d: unknown) => string | null)(decoded.data);
          if (leafTo !== null && !entries.has(leafTo))
            throw new Error(`moves the leaf to ${leafTo}, which is not an earlier entry`);
        }
      }
    } catch (err) {
      problem(lineNo, (err as Error).message);
    }

    if (e.entry) {
      entries.add(e.id);
      leaf = e.id;
    } else if (leafTo !== undefined) {
      leaf = leafTo;
    }
    drafts.push({
      id: e.id,
      type: e.type,
      v: e.v,
      time: e.time,
      entry: e.entry,
      ignorable: e.ignorable,
      data: e.data,
      ...(e.runId !== undefined ? { runId: e.runId } : {}),
      ...(e.turn !== undefined ? { turn: e.turn } : {}),
      ...(e.step !== undefined ? { step: e.step } : {}),
      ...(e.entry ? { parentId: e.parentId ?? null } : {}),
      ...(leafTo !== undefined ? { leaf: leafTo } : {}),
    });
  }

  if (!header && problems.length === 0) problem(1, 'the input is empty');
  if (header) {
    if (header.session.lastSeq !== drafts.length)
      problem(lineNo, `the header says ${header.session.lastSeq} events, the file has ${drafts.length}`);
    if (header.session.leafId !== leaf)
      problem(lineNo, `the header's leaf ${header.session.leafId} is not where the events leave it (${leaf})`);
  }
  if (problems.length > 0) throw new ImportError(problems);
  const h = header!.session;
  options.onProgress?.(lineNo);

  const keep = (options.ids ?? 'new') !== 'new';
  const sessionId = keep ? h.id : newId();
  const origin = keep ? h.origin : { sessionId: h.id, entryId: h.leafId ?? drafts.at(-1)?.id ?? h.id };
  // Each blob with the media type and encoding its export line gave it.
  const newBlobs = [...blobs].map(([hash, data]) => ({ hash, data, ...blobTypes.get(hash) }));
  return log.transaction(async (tx) => {
    if (options.ids === 'restore') {
      const s = await tx.sessions.get(sessionId);
      if (!s) throw new NotFoundError('session', sessionId);
      if (s.inArchiveAt === null || s.erasedAt !== null)
        throw new StoreError('conflict', `session ${sessionId} is not in an archive: there is nothing to restore`);
      await tx.events.putBlobs(newBlobs);
      for (let i = 0; i < drafts.length; i += 1000) await tx.events.append(sessionId, drafts.slice(i, i + 1000));
      await tx.events.seal(sessionId);
      await options.within?.(tx, s);
      return (await tx.sessions.get(sessionId))!;
    }
    if (await tx.sessions.get(sessionId))
      throw new StoreError(
        'conflict',
        `session ${sessionId} already exists: import it under new ids instead of keeping them`,
      );
    // The tenant is where it is imported, not where it was exported from.
    await tx.sessions.create({
      id: sessionId,
      tenant: options.tenant ?? 'default',
      createdAt: h.createdAt,
      title: h.title,
      metadata: h.metadata,
      agent: h.agent,
      origin,
    });
    if (h.archivedAt !== null) await tx.sessions.update(sessionId, { archivedAt: h.archivedAt });
    await tx.events.putBlobs(newBlobs);
    for (let i = 0; i < drafts.length; i += 1000) await tx.events.append(sessionId, drafts.slice(i, i + 1000));
    // A whole log, complete: stored compactly at once (ADR-0009).
    await tx.events.seal(sessionId);
    const session = (await tx.sessions.get(sessionId))!;
    await options.within?.(tx, session);
    return session;
  });
}
