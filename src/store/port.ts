/**
 * The storage port: everything durable goes through this async interface, whatever the backend
 * (embedded SQLite now, PostgreSQL later). Backends pass one contract suite (test/store/contract.ts).
 *
 * Events are append-only: the port has no way to change or remove one. Runs are rows whose every
 * change is a guarded compare-and-set, so two workers can never both win a transition.
 */
import type { WebhookStoreOps } from './webhooks.ts';
import type { WaitStoreOps } from './wait-rows.ts';
import type { LimitStoreOps } from './limit-rows.ts';
import type { EventEnvelope, Sequenced } from './event-envelope.ts';

export type JsonObject = { [key: string]: unknown };

export interface SessionRecord {
  id: string;
  /** Who owns it: API keys of other tenants cannot see it. */
  tenant: string;
  createdAt: number;
  title: string | null;
  metadata: JsonObject;
  agent: string | null;
  /** The last event's seq (0 for none): seqs are 1..lastSeq with no gap. */
  lastSeq: number;
  /** The highest turn number of its events (0 for none): the next turn is this + 1. */
  lastTurn: number;
  /** The current leaf of the conversation tree. */
  leafId: string | null;
  origin: { sessionId: string; entryId: string } | null;
  archivedAt: number | null;
  /** When the session was erased: it is a tombstone (its log and content are gone), or null. */
  erasedAt: number | null;
  /** What an erased session consumed, kept for billing: its runs, their usage and cost. */
  erasedTotals: { runs: number; usage: JsonObject; cost: number } | null;
}

export interface NewSession {
  id: string;
  tenant?: string;
  createdAt: number;
  title?: string | null;
  metadata?: JsonObject;
  agent?: string | null;
  origin?: { sessionId: string; entryId: string } | null;
}

export interface EventDraft extends Omit<EventEnvelope, 'parentId'> {
  /**
   * For an entry: it joins the tree under `parentId` (by default the current leaf, read inside
   * the appending transaction) and becomes the new leaf; null: a new root.
   */
  parentId?: string | null;
  /** For a non-entry event that moves the leaf (a branch switch): the new leaf. */
  leaf?: string | null;
  /** Readers that do not know this type may skip it. */
  ignorable?: boolean;
  /**
   * The id was generated for this draft (a fresh UUIDv7, see `newId`), not given by a caller: no
   * stored event can have it, so a store may skip looking it up before it appends. A caller's id
   * is always looked up (an append of an entry whose id the session has is refused).
   */
  minted?: boolean;
  data: unknown;
}

export interface StoredEvent extends EventEnvelope, Sequenced {
  ignorable: boolean;
  data: unknown;
}

export interface Snapshot {
  sessionId: string;
  projection: string;
  version: number;
  /** The state covers exactly the events with seq <= asOfSeq. */
  asOfSeq: number;
  /** For projections of the current path: the leaf the state was folded up to. */
  leafId: string | null;
  state: unknown;
}

export interface SessionPage {
  /** Pass as `after` for the next page. */
  after?: string;
  /** Only this tenant's sessions. */
  tenant?: string;
  limit: number;
  includeArchived?: boolean;
}

export interface ReadEventsOptions {
  afterSeq?: number;
  /** Only the events of this run. */
  runId?: string;
  /** Stop at this seq (inclusive). */
  untilSeq?: number;
  limit?: number;
}

export type RunStatus =
  | 'queued'
  | 'running'
  | 'waiting_approval'
  | 'waiting_for_user'
  | 'paused'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'timed_out'
  /** Waiting for a time (a durable sleep, ADR-0015): no worker holds it. */
  | 'sleeping'
  /** Waiting for a named signal from outside (ADR-0015): no worker holds it. */
  | 'waiting_for_signal';
export interface RunRecord {
  id: string;
  sessionId: string;
  parentRunId: string | null;
  /** For a subagent's run: the parent's tool call that started it. */
  parentToolCallId: string | null;
  agent: { name: string; version: string };
  /** What the run executes with: prompt, tools, model, settings, limits (recorded at creation). */
  agentSpec: JsonObject;
  status: RunStatus;
  /**
   * Queued behind the session's current run (an enqueued message): not claimable, and not the
   * session's active run, until that run ends and this one becomes the current one.
   */
  queuedBehind: boolean;
  triggerMessageId: string | null;
  /** The session turn this run is (null while queued behind: its turn is numbered when it comes up). */
  turn: number | null;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
  /**
   * The execution attempt: 1 when a worker first starts it, and one more each time it is recovered
   * after an interruption (a lost lease, a storage failure). Resuming after a wait or a pause is
   * the same attempt.
   */
  attempt: number;
  usage: JsonObject;
  cost: number;
  error: JsonObject | null;
  /** What a waiting run waits for (approval requests or questions), with its expiry. */
  waiting: JsonObject | null;
  lease: { owner: string; expiresAt: number } | null;
  /** Increases at every claim; every write of a worker is checked against it. */
  fencingToken: number;
  cancelRequested: boolean;
  pauseRequested: boolean;
  deadlineAt: number | null;
  options: JsonObject;
}

export interface NewRun {
  id: string;
  sessionId: string;
  parentRunId?: string | null;
  parentToolCallId?: string | null;
  agent: { name: string; version: string };
  agentSpec: JsonObject;
  triggerMessageId?: string | null;
  turn?: number | null;
  createdAt: number;
  deadlineAt?: number | null;
  options?: JsonObject;
  usage?: JsonObject;
  /** Created behind the session's current run (see RunRecord.queuedBehind). */
  queuedBehind?: boolean;
}

export type RunPatch = Partial<
  Pick<
    RunRecord,
    | 'status'
    | 'startedAt'
    | 'endedAt'
    | 'usage'
    | 'cost'
    | 'error'
    | 'waiting'
    | 'cancelRequested'
    | 'pauseRequested'
    | 'deadlineAt'
    | 'turn'
    | 'attempt'
    | 'agentSpec'
  >
> & {
  /** Only `false`: the run comes up as the session's current run. */
  queuedBehind?: false;
  lease?: null;
  /** Bumps the fencing token: whoever held the run can no longer write for it. */
  fence?: true;
};

/** Which runs a worker may claim: the runs layer's lifecycle (runs/lifecycle/run-status.ts `CLAIM_POLICY`), carried out by the store. */
export interface ClaimPolicy {
  /** Statuses a run is claimed from when no worker holds it (and it is not queued behind). */
  ready: readonly RunStatus[];
  /** Statuses a run is taken over from once its lease expired: a new attempt. */
  recoverable: readonly RunStatus[];
  /** The status a claimed run moves to. */
  to: RunStatus;
}

/** Only update when the run is still as the caller last saw it. */
export interface RunGuard {
  statuses?: readonly RunStatus[];
  fencingToken?: number;
}

export interface RunQuery {
  sessionId?: string;
  /**
   * Only the runs of this tenant's sessions, filtered by the query itself (never a window of every
   * tenant's runs filtered afterwards). Cheap with `statuses` = the runs layer's WAITING_FOR_PEOPLE (an index of
   * those runs by tenant); otherwise it reads the runs in id order.
   */
  tenant?: string;
  parentRunId?: string;
  statuses?: readonly RunStatus[];
  /** Runs created after this run id (cursor). */
  after?: string;
  limit: number;
}

export interface Checkpoint {
  runId: string;
  /** The step the state was taken after (0: before the first step). */
  step: number;
  /** The session seq of the event committed with it. */
  seq: number;
  state: unknown;
}

export interface ApiKeyRecord {
  id: string;
  tenant: string;
  name: string | null;
  /** SHA-256 of the secret: the secret itself is never stored. */
  hash: string;
  /** The first characters of the secret, to recognise it in listings. */
  prefix: string;
  ratePerMinute: number | null;
  createdAt: number;
  revokedAt: number | null;
}

export interface IdempotencyRecord {
  tenant: string;
  key: string;
  /** What the first request was (method, path, body hash): a reuse must match it. */
  fingerprint: string;
  /**
   * The HTTP status of the response, or 0: the request's effect committed (the record was written
   * in the effect's own transaction) but its response was not recorded yet. `body` is then the
   * effect's JSON (what a retry needs to answer the same), not a response.
   */
  status: number;
  body: string;
  createdAt: number;
}

export interface RunInput {
  id: string;
  sessionId: string;
  /** Steering for one run, or a message waiting for the session's next run. */
  kind: 'steer' | 'message';
  runId: string | null;
  payload: unknown;
  createdAt: number;
}

/** What usage is grouped by (see `StoreOps.usageTotals`): `day` and `hour` are time buckets (UTC), one at most. */
export type UsageDimension = 'tenant' | 'agent' | 'model' | 'day' | 'hour';
export const USAGE_DIMENSIONS: readonly UsageDimension[] = ['tenant', 'agent', 'model', 'day', 'hour'];

/** Which runs' usage to add up, and how to group it. */
export interface UsageQuery {
  /** Runs that ended at or after this time (ms since the epoch)… */
  from: number;
  /** …and before this one. */
  to: number;
  /** The grouping, in this order; none: one row for everything. */
  groupBy: readonly UsageDimension[];
  /** Only this tenant's runs (the tenant of the run's session). */
  tenant?: string;
  /** Only runs of this agent (by name). */
  agent?: string;
  /** Only runs of this model, `provider:modelId` as recorded in the run's agent spec. */
  model?: string;
}

/**
 * One group of `usageTotals`: the keys it is grouped by (only those), how many runs ended in it, and
 * their own usage and cost (each run's recorded total minus its ended children's: see `usageTotals`).
 */
export interface UsageTotals {
  tenant?: string;
  agent?: string;
  /** `provider:modelId`; null when the run's agent spec names no model. */
  model?: string | null;
  /** The start of the day or hour (UTC, ms since the epoch). */
  bucket?: number;
  runs: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  reasoningTokens: number;
  cost: number;
}

/** A run that is due (see `StoreOps.dueRuns`), with the due time it was found by (the cursor of the next page). */
export interface DueRun {
  run: RunRecord;
  dueAt: number;
}

/** Where the next page of due runs starts: after this (due time, id). */
export interface DueCursor {
  dueAt: number;
  id: string;
}

/** Every data operation. Inside `transaction` they all commit or roll back together. */
export interface StoreOps extends WebhookStoreOps, WaitStoreOps, LimitStoreOps {
  /**
   * Runs that no worker holds and that are due at `now` (the first of their wait's deadline and
   * their own deadline is at or before it), by due time then id, after `after`, at most `limit`:
   * from the index on the due time (ADR-0034, store/due-runs.ts), never a scan of the idle runs.
   */
  dueRuns(now: number, page: { after?: DueCursor; limit: number }): Promise<DueRun[]>;

  createSession(s: NewSession): Promise<SessionRecord>;
  getSession(id: string): Promise<SessionRecord | undefined>;
  listSessions(page: SessionPage): Promise<SessionRecord[]>;
  updateSession(
    id: string,
    patch: { title?: string | null; metadata?: JsonObject; archivedAt?: number | null },
  ): Promise<void>;

  /**
   * Appends atomically: allocates the next seqs, threads entries under the current leaf and moves
   * the leaf, all inside one transaction. Refuses (SeqConflictError) if `expectLastSeq` is given and
   * the session has moved on.
   */
  append(sessionId: string, drafts: readonly EventDraft[], options?: AppendOptions): Promise<StoredEvent[]>;
  readEvents(sessionId: string, options?: ReadEventsOptions): Promise<StoredEvent[]>;
  /**
   * The entries (events with `entry: true`) of this session with these ids, skipping unknown ids:
   * entries are what the tree and the API address by id. Other events are read by seq.
   */
  getEntries(sessionId: string, ids: readonly string[]): Promise<StoredEvent[]>;
  /** The entry `fromId` and its ancestors, nearest first, at most `limit`. */
  ancestors(sessionId: string, fromId: string, limit: number): Promise<StoredEvent[]>;
  /**
   * Erases a session: its events, blobs no other session refers to, snapshots, checkpoints, queued
   * inputs, the payloads of its runs (agent specs but their model, options, errors, waits), their
   * signals and callback tokens, its schedule fires, its webhook deliveries and their attempts, and
   * the idempotency records that name it, in one transaction; the schedules that target it are
   * paused (PAUSED_FOR_ERASED_SESSION). What remains is a tombstone: the session row (id, tenant,
   * `erasedAt`, `erasedTotals`), its runs' ids, statuses, times, agents, models (`agentSpec` keeps
   * only `model`), usage and cost, for billing (`usageTotals`), and the paused schedules' targets. Refused
   * (RunBusyError) while a run of the session is not terminal; erasing an erased session returns
   * its tombstone. Appends to an erased session are refused (`session_erased`).
   */
  eraseSession(sessionId: string, erasedAt: number): Promise<SessionRecord>;
  /**
   * A unit of work (a turn) ended here: the store may re-encode the session's log so far for
   * compact storage (the SQLite store seals its open rows, ADR-0009). Nothing that can be read
   * changes: the same events, seqs, ids and tree. NotFoundError for an unknown session.
   */
  sealEvents(sessionId: string): Promise<void>;

  /** Content-addressed: putting a hash that exists is a no-op. */
  putBlobs(blobs: ReadonlyArray<{ hash: string; data: string }>): Promise<void>;
  getBlobs(hashes: readonly string[]): Promise<Map<string, string>>;

  putSnapshot(s: Snapshot): Promise<void>;
  getSnapshot(sessionId: string, projection: string, version: number): Promise<Snapshot | undefined>;

  /**
   * Refuses (RunBusyError) while the session has another active run: one that is not terminal and
   * not queued behind. Any number of runs may be queued behind it.
   */
  createRun(r: NewRun): Promise<RunRecord>;
  getRun(id: string): Promise<RunRecord | undefined>;
  listRuns(q: RunQuery): Promise<RunRecord[]>;
  /** The session's active run: not terminal, not queued behind (at most one, by the store's guarantee). */
  activeRun(sessionId: string): Promise<RunRecord | undefined>;
  /** How many runs there are in each status (statuses without runs are 0), without reading the runs. */
  countRunsByStatus(): Promise<Record<RunStatus, number>>;
  /**
   * Tokens and cost of the runs that ended in [from, to), grouped, in one aggregate query. Each run
   * counts its own usage once: a run's recorded usage includes its ended children's (subagents roll
   * up into their parent, see runs/lifecycle/finish.ts), so a run's own is its recorded usage minus its ended
   * children's recorded usage. A run is bucketed by its end; runs not ended are left out. Runs of
   * erased sessions count (their rows keep usage, cost, agent and model). The order of the rows is
   * unspecified.
   */
  usageTotals(q: UsageQuery): Promise<UsageTotals[]>;
  /** A compare-and-set: refuses (RunConflictError) when the guard no longer holds. */
  updateRun(id: string, patch: RunPatch, guard?: RunGuard): Promise<RunRecord>;
  /**
   * Takes the oldest run the policy says may be claimed, for `owner`: one in a `ready` status (and
   * not queued behind), or one in a `recoverable` status whose lease expired. It moves to
   * `policy.to` with a lease until `now + leaseMs` and its fencing token increased; its attempt
   * increases for a first start or a recovery (not for a run resuming after a wait).
   * `firstStart`: the run was never claimed before (its attempt was 0), so nothing of its turn
   * and no checkpoint of it can be stored yet.
   */
  claimRun(
    owner: string,
    leaseMs: number,
    now: number,
    policy: ClaimPolicy,
    options?: { runId?: string },
  ): Promise<{ run: RunRecord; previous: RunStatus; firstStart: boolean } | undefined>;
  /** Extends the lease; false when the run is no longer this owner's (token moved on). */
  renewLease(id: string, owner: string, fencingToken: number, expiresAt: number): Promise<boolean>;

  putCheckpoint(c: Checkpoint): Promise<void>;
  getCheckpoint(runId: string): Promise<Checkpoint | undefined>;

  addInput(i: RunInput): Promise<void>;
  /** Removes and returns, oldest first, the inputs of a kind for a session (and run). */
  takeInputs(sessionId: string, kind: RunInput['kind'], runId?: string | null, limit?: number): Promise<RunInput[]>;
  /** Returns, oldest first, without removing them. */
  listInputs(sessionId: string, kind: RunInput['kind'], runId?: string | null, limit?: number): Promise<RunInput[]>;
  /** Removes one input; false when it was already gone. */
  removeInput(id: string): Promise<boolean>;
  countInputs(sessionId: string, kind: RunInput['kind']): Promise<number>;

  createApiKey(k: ApiKeyRecord): Promise<void>;
  findApiKey(hash: string): Promise<ApiKeyRecord | undefined>;
  listApiKeys(tenant?: string): Promise<ApiKeyRecord[]>;
  /** False when there is no such key. */
  revokeApiKey(id: string, at: number): Promise<boolean>;

  getIdempotency(tenant: string, key: string): Promise<IdempotencyRecord | undefined>;
  /**
   * Stores the first response for a key; returns the one already stored if another request won.
   * A record with status 0 (an effect committed without its response, see `IdempotencyRecord`)
   * is completed by the first put of a response with the same fingerprint.
   */
  putIdempotency(r: IdempotencyRecord): Promise<IdempotencyRecord>;
  /** Forgets records older than `before`. */
  pruneIdempotency(before: number): Promise<number>;

  /** Schedules (runs/schedules.ts, ADR-0016). `conflict` when the id exists. */
  createSchedule(s: ScheduleRecord): Promise<ScheduleRecord>;
  /** Inside a transaction, PostgreSQL locks the row until it ends (fires of one schedule take turns). */
  getSchedule(id: string): Promise<ScheduleRecord | undefined>;
  /** By id, after the cursor; only a tenant's when given. */
  listSchedules(q: ScheduleQuery): Promise<ScheduleRecord[]>;
  /** NotFoundError when there is no such schedule. */
  updateSchedule(id: string, patch: SchedulePatch): Promise<ScheduleRecord>;
  /** Removes the schedule and its fires; false when it did not exist. */
  deleteSchedule(id: string): Promise<boolean>;
  /**
   * Schedules not paused whose next fire is at or before `now`, earliest first, from the index on
   * `next_fire_at`. Inside a transaction, PostgreSQL locks them and skips those another transaction
   * holds (FOR UPDATE SKIP LOCKED): two workers never fire one schedule at once.
   */
  dueSchedules(now: number, limit: number): Promise<ScheduleRecord[]>;
  /** Records a fire; false (and nothing written) when that tick of that schedule has one already (UNIQUE (schedule_id, tick)). */
  addScheduleFire(f: ScheduleFireRecord): Promise<boolean>;
  /** The schedule's fires, newest tick first, before the `before` tick when given. */
  listScheduleFires(scheduleId: string, q: { before?: number; limit: number }): Promise<ScheduleFireRecord[]>;
}

export type ScheduleOverlap = 'skip' | 'enqueue' | 'interrupt';
export type ScheduleCatchUp = 'once' | 'skip';
export type ScheduleTarget = { sessionId: string } | { newSession: { title?: string | null; metadata?: JsonObject } };

/** A schedule: when it fires (cron with a time zone, or an interval), what it sends, and where. */
export interface ScheduleRecord {
  id: string;
  tenant: string;
  name: string | null;
  cron: { expression: string; timezone: string } | null;
  intervalSeconds: number | null;
  /** The message sent at each fire (a UserInput, as JSON). */
  message: unknown;
  target: ScheduleTarget;
  /** `name` or `name@version`; null: the runtime's default agent. */
  agent: string | null;
  overlap: ScheduleOverlap;
  catchUp: ScheduleCatchUp;
  pausedAt: number | null;
  /** Why Keel paused it by itself (its target session was archived or erased, its tenant's sessions were erased); null when a person paused it, or it runs. */
  pausedReason: string | null;
  /** The next tick (ms); null when paused or when the cron has no next time. */
  nextFireAt: number | null;
  /** The tick of the last fire (any outcome), and the run it created. */
  lastTick: number | null;
  lastRunId: string | null;
  createdAt: number;
  updatedAt: number;
}

export type SchedulePatch = Partial<
  Pick<ScheduleRecord, 'pausedAt' | 'pausedReason' | 'nextFireAt' | 'lastTick' | 'lastRunId' | 'updatedAt'>
>;

export interface ScheduleQuery {
  tenant?: string;
  /** Schedules with an id after this one (cursor). */
  after?: string;
  limit: number;
}

/** One tick of a schedule and what it did: a run (`fired`), nothing (`skipped`, with why), or an error (`failed`). */
export interface ScheduleFireRecord {
  scheduleId: string;
  tick: number;
  firedAt: number;
  outcome: 'fired' | 'skipped' | 'failed';
  reason: string | null;
  runId: string | null;
  sessionId: string | null;
}

export interface AppendOptions {
  expectLastSeq?: number;
  /** Append only while this run's fencing token is still `token` (the writer still holds it). */
  fence?: { runId: string; token: number };
}

/**
 * What a change notice may say: a commit appended to this session, up to this seq (`own`: every
 * commit to the session since its previous notice was this store instance's, which its caller
 * knows of already; a backend that cannot tell leaves it out); or a message another node broadcast
 * about the session (see `Store.broadcast`).
 */
export type StoreChange =
  | { sessionId: string; lastSeq: number; own?: true; message?: undefined }
  | { sessionId: string; message: JsonObject; lastSeq?: undefined; own?: undefined };

export interface Store extends StoreOps {
  readonly kind: string;
  /**
   * Calls `listener` soon after another connection (another process, another node) committed,
   * best effort, for as long as it is registered; returns the unregistration. With a `change`, the
   * commit appended to that session up to that seq (a store that relays broadcasts tells of this
   * instance's own commits too, in the same order as the others'); without one, anything may have
   * changed. What changed is read from the store. A store that cannot tell leaves it out.
   */
  changes?(listener: (change?: StoreChange) => void): () => void;
  /**
   * Tells the other nodes' `changes` listeners a short-lived message about a session (the live
   * feed's token deltas), stored nowhere: best effort, in the order sent, never to this store
   * instance itself, and before the notice of any commit this instance makes after it (a reader
   * that heard of a commit has heard the deltas streamed before it). PostgreSQL relays it by NOTIFY,
   * a SQLite file by its local bus (ADR-0035); a store with no other node (SQLite's `:memory:`)
   * leaves it out.
   */
  broadcast?(sessionId: string, message: JsonObject): void;
  /**
   * Resolves once every notice of what was committed (and broadcast) before the call, by any node,
   * has reached this instance's `changes` listeners: a barrier through the backend's own channel,
   * whatever the lag. Given by a store that has `broadcast`; it may never resolve while the
   * store's connection for notices is down (a caller bounds its wait).
   */
  noticesCaughtUp?(): Promise<void>;
  /**
   * Tells `listener` how long each write transaction of this instance took, in seconds, from its
   * start to its commit (the commit-latency metric); returns the unregistration. Synchronous, on
   * the commit path: keep it cheap.
   */
  observeCommits?(listener: (seconds: number) => void): () => void;
  /**
   * Runs `fn` as one unit of work: everything it does through `tx` commits together or not at all.
   * What `fn` reads of a session or a run (`getSession`, `getRun`) stays as read until it commits:
   * another transaction that reads the same row waits (SQLite runs one writer at a time; PostgreSQL
   * locks the row, ADR-0011).
   */
  transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export class StoreError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.code = code;
  }
}

/** The store was closed: every later operation fails the same way (background loops end on it). */
export const isClosedStore = (e: unknown): boolean => e instanceof StoreError && e.code === 'closed';

export class NotFoundError extends StoreError {
  constructor(what: string, id: string) {
    super('not_found', `${what} ${id} does not exist`);
    this.name = 'NotFoundError';
  }
}

export class SeqConflictError extends StoreError {
  constructor(sessionId: string, expected: number, actual: number) {
    super('seq_conflict', `session ${sessionId} is at seq ${actual}, not ${expected}`);
    this.name = 'SeqConflictError';
  }
}

export class RunBusyError extends StoreError {
  readonly activeRunId: string;
  constructor(sessionId: string, activeRunId: string) {
    super('run_busy', `session ${sessionId} already has an active run ${activeRunId}`);
    this.name = 'RunBusyError';
    this.activeRunId = activeRunId;
  }
}

export class RunConflictError extends StoreError {
  readonly run: RunRecord | undefined;
  constructor(id: string, run: RunRecord | undefined, guard: RunGuard) {
    super(
      'run_conflict',
      run
        ? `run ${id} changed meanwhile (status ${run.status}, fencing token ${run.fencingToken}; expected ${guard.statuses ? `status ${guard.statuses.join('|')}` : 'any status'}${guard.fencingToken !== undefined ? `, token ${guard.fencingToken}` : ''})`
        : `run ${id} does not exist`,
    );
    this.name = 'RunConflictError';
    this.run = run;
  }
}

export class FencedError extends StoreError {
  constructor(runId: string, token: number, current: number | undefined) {
    super(
      'fenced',
      `run ${runId}: fencing token ${token} is stale (now ${current ?? 'none'}): this worker no longer holds the run`,
    );
    this.name = 'FencedError';
  }
}

export class SchemaVersionError extends StoreError {
  constructor(message: string) {
    super('schema_version', message);
    this.name = 'SchemaVersionError';
  }
}
