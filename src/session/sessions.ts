import type { LanguageModelV4 } from '@ai-sdk/provider';
import {
  newId,
  startTurn,
  userMessage,
  type AgentDefinition,
  type LargePayloadPolicy,
  type TurnHandle,
  type TurnHooks,
  type TurnOptions,
  type UserInput,
} from '../core/index.ts';
import type { Message, Pricing } from '../model/index.ts';
import {
  refuseNul,
  RunBusyError,
  StoreError,
  type BlobInfo,
  type BlobStore,
  type JsonObject,
  type SessionPage,
  type SessionRecord,
  type Store,
  type StoreOps,
} from '../store/index.ts';
import {
  compactSession,
  compactionHook,
  estimateTokens,
  summarize,
  type CompactionSettings,
  type CompactOptions,
  type CompactResult,
} from './compaction.ts';
import type { EventRegistry, SessionEvent } from './event-types.ts';
import { SessionLog, type LiveListener, type NewEvent } from './log.ts';
import {
  contextMessages,
  contextProjection,
  developerProjection,
  statsProjection,
  transcriptProjection,
  turnConversation,
  type DeveloperState,
  type StatsState,
  type TranscriptItem,
} from './projections/index.ts';
import { pathEntries, readProjection } from './reader.ts';
import { verifyReplay, type ReplayReport } from './replay.ts';
import { SessionSink } from './sink.ts';
import { checkedUserMessage } from './user-message-content.ts';
import { exportSession, importSession, type ImportOptions } from './transfer.ts';

export interface SessionsOptions {
  store: Store;
  registry?: EventRegistry;
  /** Write a projection snapshot once a read had to fold this many events. */
  snapshotEvery?: number;
  /** Large payloads (ADR-0040): the threshold, the event bound, what the model sees, and where they are stored. */
  largePayloads?: LargePayloadOptions;
}

/** How large payloads are stored and shown to the model (defaults: DEFAULT_LARGE_PAYLOADS; the database stores them). */
export type LargePayloadOptions = Partial<LargePayloadPolicy> & {
  /** Where large payloads go instead of the database (an archive store): the seam of issue 42's archives. */
  store?: BlobStore;
};

export interface ModelContext {
  messages: Message[];
  /** Estimated tokens of `messages`. */
  tokens: number;
  /** Input tokens the provider reported for the last call on this path, if any since the last compaction. */
  lastInputTokens: number | null;
  /** Older messages left out to fit `budgetTokens` (0 when everything fit). */
  omitted: number;
  asOfSeq: number;
  leafId: string | null;
}

export interface SessionTurnOptions extends Omit<TurnOptions, 'sink' | 'history' | 'turn' | 'scope' | 'resume'> {
  runId?: string;
  compaction?: CompactionSettings;
}

export class InvalidEntryError extends StoreError {
  constructor(sessionId: string, entryId: string) {
    super('invalid_entry', `session ${sessionId} has no conversation entry ${entryId}`);
    this.name = 'InvalidEntryError';
  }
}

/** The longest id a session may be given (as the HTTP API's ids): it names it in every path. */
const MAX_SESSION_ID = 200;

/**
 * The session layer's library API. A session owns an append-only event log; its transcript, model
 * context, developer view and statistics are projections of that log.
 */
export class Sessions {
  readonly log: SessionLog;
  readonly snapshotEvery: number;

  constructor(options: SessionsOptions) {
    this.log = new SessionLog(
      options.store,
      options.registry,
      options.largePayloads ? { largePayloads: options.largePayloads } : {},
    );
    this.snapshotEvery = options.snapshotEvery ?? 256;
    // What a program reads after its run: kept up to date by this process's commits, it reads no log.
    this.log.follow(transcriptProjection);
  }

  get store(): Store {
    return this.log.store;
  }

  /**
   * Creates a session. `within` runs in the creating transaction with the new session: whatever it
   * writes commits with the session or not at all (the server records an Idempotency-Key there).
   */
  async create(
    options: {
      id?: string;
      tenant?: string;
      title?: string | null;
      metadata?: JsonObject;
      agent?: string | null;
      origin?: { sessionId: string; entryId: string } | null;
      within?: (tx: StoreOps, session: SessionRecord) => Promise<void>;
    } = {},
  ): Promise<SessionRecord> {
    if (
      options.id !== undefined &&
      !(typeof options.id === 'string' && options.id.length >= 1 && options.id.length <= MAX_SESSION_ID)
    ) {
      throw new StoreError(
        'validation',
        `id: a string of 1 to ${MAX_SESSION_ID} characters is required, not ${JSON.stringify(options.id)?.slice(0, 40)}`,
      );
    }
    // Text the store keeps as text (its content, metadata, is JSON and may hold anything).
    refuseNul('id', options.id);
    refuseNul('tenant', options.tenant);
    refuseNul('title', options.title);
    refuseNul('agent', options.agent);
    const id = options.id ?? newId();
    const createdAt = Date.now();
    const created = await this.log.transaction(async (tx) => {
      await tx.sessions.create({
        id,
        tenant: options.tenant ?? 'default',
        createdAt,
        title: options.title ?? null,
        metadata: options.metadata ?? {},
        agent: options.agent ?? null,
        origin: options.origin ?? null,
      });
      const events = await this.log.append(
        id,
        [
          {
            type: 'session/created',
            time: createdAt,
            data: {
              title: options.title ?? null,
              metadata: (options.metadata ?? {}) as Record<string, never>,
              agent: options.agent ?? null,
              origin: options.origin ?? null,
            },
          },
        ],
        { tx },
      );
      const session = (await tx.sessions.get(id))!;
      await options.within?.(tx, session);
      return { session, events };
    });
    return created.session;
  }

  get(id: string): Promise<SessionRecord> {
    return this.log.session(id);
  }

  /** The session's record, or undefined: an erased session's tombstone too (`get` refuses those). */
  find(id: string): Promise<SessionRecord | undefined> {
    return this.store.sessions.get(id);
  }

  list(page: SessionPage): Promise<SessionRecord[]> {
    return this.store.sessions.list(page);
  }

  async update(id: string, patch: { title?: string | null; metadata?: JsonObject }): Promise<SessionRecord> {
    refuseNul('title', patch.title);
    await this.log.transaction(async (tx) => {
      await tx.sessions.update(id, patch);
      return this.log.append(
        id,
        [{ type: 'session/updated', data: patch as { title?: string | null; metadata?: Record<string, never> } }],
        { tx },
      );
    });
    return this.get(id);
  }

  /**
   * Erases a session (see `StoreOps.eraseSession`): its log and content are removed, a tombstone
   * with its totals remains, and this process forgets what it kept of it. Refused (RunBusyError)
   * while one of its runs is not terminal: the runtime's `erase` cancels them first.
   */
  async erase(id: string): Promise<SessionRecord> {
    const tomb = await this.store.sessions.erase(id, Date.now());
    this.log.forget(id);
    return tomb;
  }

  /** Archives a session: it leaves default listings; its log stays readable. */
  async archive(id: string): Promise<SessionRecord> {
    await this.log.transaction(async (tx) => {
      await tx.sessions.update(id, { archivedAt: Date.now() });
      return this.log.append(id, [{ type: 'session/archived', data: {} }], { tx });
    });
    return this.get(id);
  }

  append(
    sessionId: string,
    events: readonly NewEvent[],
    options?: { expectLastSeq?: number },
  ): Promise<SessionEvent[]> {
    return this.log.append(sessionId, events, options);
  }

  /** Appends user input outside a turn; the next turn's context includes it. */
  async appendUserMessage(sessionId: string, input: UserInput): Promise<SessionEvent<'user/message'>> {
    const message = checkedUserMessage(this.log.registry, userMessage(input));
    const [e] = await this.log.append(sessionId, [{ type: 'user/message', data: { message, via: 'input' } }]);
    return e as SessionEvent<'user/message'>;
  }

  /** Events after `after` (a seq), at most `limit`, in seq order. */
  events(sessionId: string, options: { after?: number; limit?: number } = {}): Promise<SessionEvent[]> {
    return this.log.read(sessionId, { afterSeq: options.after ?? 0, limit: Math.min(options.limit ?? 1000, 10_000) });
  }

  subscribe(sessionId: string, listener: LiveListener): () => void {
    return this.log.subscribe(sessionId, listener);
  }

  /** What the model sees next: the current branch path with compaction applied. */
  async context(sessionId: string, options: { budgetTokens?: number } = {}): Promise<ModelContext> {
    const read = await readProjection(this.log, sessionId, contextProjection, this.snapshotEvery);
    let messages = contextMessages(read.state);
    let omitted = 0;
    if (options.budgetTokens !== undefined) {
      // Over budget even after compaction: drop the oldest messages at cuts that keep tool calls with their results.
      while (messages.length > 1 && estimateTokens(messages) > options.budgetTokens) {
        let cut = 1;
        while (cut < messages.length && messages[cut]!.role === 'tool') cut++;
        if (cut >= messages.length) break;
        omitted += cut;
        messages = messages.slice(cut);
      }
    }
    return {
      messages,
      tokens: estimateTokens(messages),
      lastInputTokens: read.state.lastInputTokens,
      omitted,
      asOfSeq: read.asOfSeq,
      leafId: read.leafId,
    };
  }

  /** Stored content by hash (a request header's system prompt and tool schemas), parsed; missing hashes are absent. */
  async content(hashes: ReadonlyArray<string | null>): Promise<Map<string, unknown>> {
    const wanted = [...new Set(hashes.filter((h): h is string => h !== null))];
    const found = wanted.length > 0 ? await this.store.events.getBlobs(wanted) : new Map<string, string>();
    return new Map([...found].map(([h, data]) => [h, JSON.parse(data) as unknown]));
  }

  /**
   * Content the log refers to by hash (a large payload, ADR-0040), for a tenant one of whose
   * sessions refers to it: its text and what is known of it (media type, encoding); undefined for
   * any other tenant, or a hash nothing stores.
   */
  async blob(hash: string, tenant: string): Promise<{ data: string; info: BlobInfo | undefined } | undefined> {
    if (!(await this.store.events.blobTenant(hash, tenant))) return undefined;
    const blobs = this.log.blobs();
    const [texts, info] = await Promise.all([blobs.get([hash]), blobs.info([hash])]);
    const data = texts.get(hash);
    return data === undefined ? undefined : { data, info: info.get(hash) };
  }

  /** The working conversation of a running turn, rebuilt from the log (see turnConversation). */
  async turnConversation(sessionId: string, turn: number): Promise<{ messages: Message[]; asOfSeq: number }> {
    const read = await readProjection(this.log, sessionId, contextProjection, this.snapshotEvery);
    return { messages: turnConversation(read.state, turn), asOfSeq: read.asOfSeq };
  }

  async transcript(sessionId: string): Promise<TranscriptItem[]> {
    return (await readProjection(this.log, sessionId, transcriptProjection, this.snapshotEvery)).state.items;
  }

  async developerView(sessionId: string): Promise<DeveloperState> {
    return (await readProjection(this.log, sessionId, developerProjection, this.snapshotEvery)).state;
  }

  /** Pass `tx` to read inside a transaction. */
  async stats(sessionId: string, tx?: StoreOps): Promise<StatsState> {
    return (await readProjection(this.log, sessionId, statsProjection, this.snapshotEvery, tx)).state;
  }

  /** The entries of the session with these ids (unknown ids skipped), decoded. */
  async entries(sessionId: string, ids: readonly string[]): Promise<SessionEvent[]> {
    return this.log.decode(await this.store.events.entries(sessionId, ids));
  }

  private async entry(sessionId: string, entryId: string): Promise<SessionEvent> {
    const [e] = await this.log.decode(await this.store.events.entries(sessionId, [entryId]));
    if (!e || !e.entry) throw new InvalidEntryError(sessionId, entryId);
    return e;
  }

  /** Moves the current leaf to another entry (another branch); the move itself is an event. */
  async switchBranch(sessionId: string, entryId: string | null): Promise<SessionEvent> {
    if (entryId !== null) await this.entry(sessionId, entryId);
    const [e] = await this.moveLeaf(sessionId, [{ type: 'leaf/move', data: { entryId, reason: 'switch' } }]);
    return e!;
  }

  /**
   * Appends a move of the leaf, refused (RunBusyError) while a run of the session is active: a
   * running turn continues the path it started on, and its later entries must not land elsewhere.
   * The check and the move are one transaction.
   */
  private async moveLeaf(
    sessionId: string,
    events: readonly NewEvent[],
    options: { expectLastSeq?: number } = {},
  ): Promise<SessionEvent[]> {
    return this.log.transaction(async (tx) => {
      const active = await tx.runs.active(sessionId);
      if (active) throw new RunBusyError(sessionId, active.id);
      return this.log.append(sessionId, events, { ...options, tx });
    });
  }

  /**
   * Forks at `entryId`. Into a branch: the leaf moves there (optionally under a summary entry of
   * the path being left). Into a session: a new session starts with a copy of the path to
   * `entryId` and records where it came from.
   */
  async fork(
    sessionId: string,
    entryId: string,
    options: {
      into: 'branch' | 'session';
      summary?: string | { model: LanguageModelV4; pricing?: Pricing };
      title?: string;
      /** For a fork into a session: runs in the transaction that creates it (see `create`). */
      within?: (tx: StoreOps, sessionId: string) => Promise<void>;
    },
  ): Promise<{ sessionId: string; leafId: string }> {
    refuseNul('title', options.title);
    const at = await this.entry(sessionId, entryId);
    if (options.into === 'session') return this.forkToSession(sessionId, at, options.title, options.within);

    const session = await this.get(sessionId);
    const events: NewEvent[] = [{ type: 'leaf/move', data: { entryId, reason: 'fork' } }];
    if (options.summary !== undefined) {
      const abandoned = await this.abandonedPath(sessionId, session.leafId, entryId);
      let summary: Extract<NewEvent, { type: 'branch/summary' }>['data'];
      if (typeof options.summary === 'string') {
        summary = {
          summary: options.summary,
          abandonedLeafId: session.leafId,
          model: null,
          usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 },
          cost: 0,
        };
      } else {
        const s = await summarize(null, abandoned, {
          model: options.summary.model,
          ...(options.summary.pricing ? { pricing: options.summary.pricing } : {}),
        });
        summary = {
          summary: s.text,
          abandonedLeafId: session.leafId,
          model: { provider: options.summary.model.provider, modelId: options.summary.model.modelId },
          usage: s.result.usage,
          cost: s.cost,
        };
      }
      events.push({ type: 'branch/summary', parentId: entryId, data: summary });
    }
    const appended = await this.moveLeaf(sessionId, events, { expectLastSeq: session.lastSeq });
    return { sessionId, leafId: appended.at(-1)!.type === 'branch/summary' ? appended.at(-1)!.id : entryId };
  }

  /** The messages on the current path after the fork point: what a branch summary describes. */
  private async abandonedPath(sessionId: string, leafId: string | null, forkAt: string): Promise<Message[]> {
    // Read as the model sees it: the summarizer is a model.
    const path = await pathEntries(this.log, sessionId, leafId, false, this.store, this.log.payloads.modelView);
    const i = path.findIndex((e) => e.id === forkAt);
    const state = contextProjection.init();
    for (const e of path.slice(i + 1)) contextProjection.apply(state, e);
    return state.messages;
  }

  /**
   * A new session with a copy of the path to `entryId` of `sourceId` (see `fork`), or, for `null`,
   * with nothing of it (a rerun that replaces a session's first message: no origin); `within` runs
   * in the transaction that creates it. Its leaf is the copy of `entryId` (null for `null`).
   */
  async forkIntoSession(
    sourceId: string,
    entryId: string | null,
    options: { title?: string; within?: (tx: StoreOps, sessionId: string) => Promise<void> } = {},
  ): Promise<{ sessionId: string; leafId: string | null }> {
    refuseNul('title', options.title);
    const at = entryId === null ? null : await this.entry(sourceId, entryId);
    return this.forkToSession(sourceId, at, options.title, options.within);
  }

  private async forkToSession(
    sourceId: string,
    at: SessionEvent,
    title?: string,
    within?: (tx: StoreOps, sessionId: string) => Promise<void>,
  ): Promise<{ sessionId: string; leafId: string }>;
  private async forkToSession(
    sourceId: string,
    at: SessionEvent | null,
    title?: string,
    within?: (tx: StoreOps, sessionId: string) => Promise<void>,
  ): Promise<{ sessionId: string; leafId: string | null }>;
  private async forkToSession(
    sourceId: string,
    at: SessionEvent | null,
    title?: string,
    within?: (tx: StoreOps, sessionId: string) => Promise<void>,
  ): Promise<{ sessionId: string; leafId: string | null }> {
    const source = await this.get(sourceId);
    const path = at === null ? [] : await pathEntries(this.log, sourceId, at.id, false);
    const id = newId();
    const ids = new Map<string, string>();
    const copies: NewEvent[] = path.map((e) => {
      const copyId = newId();
      ids.set(e.id, copyId);
      let data = e.data;
      if (e.type === 'compaction' && e.data.firstKeptEntryId !== null) {
        data = { ...e.data, firstKeptEntryId: ids.get(e.data.firstKeptEntryId) ?? null };
      }
      return {
        type: e.type,
        data,
        id: copyId,
        time: e.time,
        parentId: e.parentId === undefined ? null : (ids.get(e.parentId) ?? null),
        ...(e.turn !== undefined ? { turn: e.turn } : {}),
        ...(e.step !== undefined ? { step: e.step } : {}),
        ...(e.runId !== undefined ? { runId: e.runId } : {}),
      } as NewEvent;
    });
    const createdAt = Date.now();
    const origin = at === null ? null : { sessionId: sourceId, entryId: at.id };
    const newTitle = title ?? (source.title ? `${source.title} (fork)` : null);
    await this.log.transaction(async (tx) => {
      await tx.sessions.create({
        id,
        tenant: source.tenant,
        createdAt,
        title: newTitle,
        metadata: source.metadata,
        agent: source.agent,
        origin,
      });
      const appended = await this.log.append(
        id,
        [
          {
            type: 'session/created',
            time: createdAt,
            data: { title: newTitle, metadata: source.metadata as Record<string, never>, agent: source.agent, origin },
          },
          ...copies,
        ],
        { tx },
      );
      await within?.(tx, id);
      return appended;
    });
    return { sessionId: id, leafId: at === null ? null : ids.get(at.id)! };
  }

  /** The session as versioned JSONL lines (see transfer.ts). */
  export(sessionId: string): AsyncGenerator<string> {
    return exportSession(this.log, sessionId);
  }

  /**
   * Imports an export: every line is validated first; any problem refuses it all (ImportError).
   * Under new ids unless `ids: 'keep'` (see ImportOptions).
   */
  import(
    input: string | Iterable<string> | AsyncIterable<string | Uint8Array>,
    options?: ImportOptions,
  ): Promise<SessionRecord> {
    return importSession(this.log, input, options);
  }

  /** Rebuilds every recorded request from the log and compares it with its header. */
  verifyReplay(sessionId: string, options?: { onProgress?: (events: number) => void }): Promise<ReplayReport> {
    return verifyReplay(this.log, sessionId, options);
  }

  compact(sessionId: string, options: CompactOptions): Promise<CompactResult> {
    return compactSession(this.log, sessionId, { reason: 'manual', ...options }, this.snapshotEvery);
  }

  /**
   * Starts a turn on this session: the context projection is its history, the session log its
   * event sink, and (with `compaction`) the context is compacted at step boundaries when it gets
   * close to the window, or after the provider reports an overflow.
   */
  async startTurn(sessionId: string, agent: AgentDefinition, options: SessionTurnOptions = {}): Promise<TurnHandle> {
    // The input is checked as a message before the turn starts: the turn logs the checked parts.
    const input =
      options.input !== undefined
        ? checkedUserMessage(this.log.registry, userMessage(options.input)).content
        : undefined;
    const [ctx, session] = await Promise.all([this.context(sessionId), this.get(sessionId)]);
    const { compaction, runId, hooks, ...rest } = options;
    const allHooks: TurnHooks[] = hooks === undefined ? [] : Array.isArray(hooks) ? [...hooks] : [hooks as TurnHooks];
    if (compaction) allHooks.push(compactionHook(this.log, sessionId, agent.model, compaction, this.snapshotEvery));
    return startTurn(agent, {
      ...rest,
      ...(input !== undefined ? { input } : {}),
      sink: new SessionSink(this.log, sessionId, runId !== undefined ? { runId } : {}),
      history: ctx.messages,
      turn: session.lastTurn + 1,
      scope: sessionId,
      hooks: allHooks,
      largePayloads: this.log.payloads,
    });
  }
}
