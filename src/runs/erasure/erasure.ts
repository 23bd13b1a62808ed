/**
 * Erasure you can prove (issue 42 part 3, ADR-0041, docs/operations.md): erasing a session,
 * a tenant, or every session idle since before a date, from the store and every erasure
 * participant; an audit record of each erasure (scope, a hash of its target, who, when, counts);
 * and `verify`, which scans every table and participant for ids and strings afterwards.
 */
import { newId } from '../../core/ids.ts';
import type { Clock } from '../../core/clock.ts';
import {
  NotFoundError,
  type ErasureFinding,
  type ErasureRecord,
  type ErasureScope,
  type SessionRecord,
  type Store,
} from '../../store/index.ts';
import { erasureTargetHash } from '../../store/erasure-scan.ts';
import { FieldValidationError } from '../field-validation-error.ts';
import type { ErasureParticipant, ErasureTarget } from './participant.ts';

/** Who asks for an erasure: an API key's id, or `operator` (the CLI, a server without keys). */
export interface ErasureActor {
  by?: string;
  /** Only sessions of this tenant (a tenant's API key): another tenant's session is not found. */
  tenant?: string;
}

/** What an erasure did: its audit record, and the sessions it erased. */
export interface ErasureResult extends ErasureRecord {
  /** The sessions it erased (not kept in the audit). */
  sessionIds: string[];
  /** What the store did about physical copies, and what it cannot do (store.erasure.purge). */
  physical: string;
}

/** What `verify` found: remnants (none after a correct erasure), and what erasure keeps by design. */
export interface ErasureReport {
  clean: boolean;
  /** What was searched for: the needles given, and the ids of the tombstones' runs they name. */
  needles: string[];
  /** Places that still hold a needle: none after a correct erasure. */
  remnants: ErasureFinding[];
  /** Places an erasure keeps by design, ids only (tombstones, ADR-0010): see ErasureFinding.kept. */
  kept: ErasureFinding[];
  /** The participants scanned besides the store. */
  participants: string[];
}

/** What an erasure needs of the runtime. */
export interface ErasureHost {
  store: Store;
  clock: Clock;
  /** Erases one session: archived, its runs cancelled, its subagents' sessions erased, then erased (rt.sessions.erase). */
  eraseSession(sessionId: string): Promise<SessionRecord>;
  /** Pauses a tenant's schedules, then erases each of its sessions (rt.sessions.eraseTenant). */
  eraseTenantSessions(tenant: string): Promise<{ erased: number }>;
  participants: readonly ErasureParticipant[];
}

/** The shortest needle `verify` takes: a shorter one would be found everywhere. */
export const MIN_NEEDLE_LENGTH = 4;
/** The most needles one `verify` takes. */
export const MAX_NEEDLES = 1000;
const PAGE = 100;

export class Erasure {
  private readonly host: ErasureHost;

  constructor(host: ErasureHost) {
    this.host = host;
  }

  /** The participants erasures reach besides the store. */
  get participants(): readonly ErasureParticipant[] {
    return this.host.participants;
  }

  /** Erases one session (and its subagents' sessions); NotFoundError for none, another tenant's. */
  async eraseSession(sessionId: string, actor: ErasureActor = {}): Promise<ErasureResult> {
    const s = await this.host.store.sessions.get(sessionId);
    if (!s || (actor.tenant !== undefined && s.tenant !== actor.tenant)) throw new NotFoundError('session', sessionId);
    const ids = await this.sessionAndChildren(sessionId);
    // Counted: the sessions this erasure erases (a retry of one a participant failed reaches them all again).
    let fresh = 0;
    for (const id of ids) if ((await this.host.store.sessions.get(id))?.erasedAt === null) fresh++;
    await this.host.eraseSession(sessionId);
    return this.finish('session', sessionId, actor, { scope: 'session', sessionIds: ids }, { sessions: fresh });
  }

  /**
   * Erases a tenant: its API keys revoked, its schedules paused, each of its sessions erased (runs
   * cancelled), then its own rows (store.erasure.eraseTenant: keys revoked and unnamed; schedules,
   * webhooks, datasets, batches and idempotency records deleted), then what the participants keep
   * of it.
   */
  async eraseTenant(tenant: string, actor: ErasureActor = {}): Promise<ErasureResult> {
    if (tenant === '') throw new FieldValidationError('tenant', 'must not be empty');
    if (actor.tenant !== undefined && actor.tenant !== tenant)
      throw new FieldValidationError('tenant', 'a tenant may erase only itself');
    // Its keys first: no request of the tenant's makes anything new while it goes.
    const now = this.host.clock.now();
    for (const key of await this.host.store.keys.list(tenant))
      if (key.revokedAt === null) await this.host.store.keys.revoke(key.id, now);
    const ids = await this.allSessions({ tenant });
    await this.host.eraseTenantSessions(tenant);
    // Sessions made meanwhile (a schedule that fired before its pause) go too.
    for (const id of await this.allSessions({ tenant })) {
      await this.host.eraseSession(id);
      ids.push(id);
    }
    const rows = await this.host.store.erasure.eraseTenant(tenant, this.host.clock.now());
    return this.finish(
      'tenant',
      tenant,
      actor,
      { scope: 'tenant', sessionIds: ids, tenant },
      {
        sessions: ids.length,
        ...rows,
      },
    );
  }

  /**
   * Erases every session of a tenant (its schedules paused first), nothing else of it: what `POST
   * /v1/sessions/erase` and `keel sessions erase --tenant T --all` do. Audited as a `tenant` erasure
   * whose counts say only `sessions`.
   */
  async eraseTenantSessions(tenant: string, actor: ErasureActor = {}): Promise<ErasureResult> {
    if (tenant === '') throw new FieldValidationError('tenant', 'must not be empty');
    const ids = await this.allSessions({ tenant });
    await this.host.eraseTenantSessions(tenant);
    return this.finish('tenant', tenant, actor, { scope: 'tenant', sessionIds: ids, tenant }, { sessions: ids.length });
  }

  /**
   * Erases every session whose last activity is before `before` (ms): created before it, with no run
   * created or ended since and none still going (events appended outside runs are not looked at).
   */
  async eraseBefore(before: number, actor: ErasureActor = {}): Promise<ErasureResult> {
    if (!Number.isFinite(before)) throw new FieldValidationError('before', 'must be a date');
    const ids: string[] = [];
    for (let after: string | undefined; ;) {
      const page = await this.host.store.erasure.sessions({
        idleBefore: before,
        limit: PAGE,
        ...(actor.tenant !== undefined ? { tenant: actor.tenant } : {}),
        ...(after !== undefined ? { after } : {}),
      });
      for (const id of page) {
        const s = await this.host.store.sessions.get(id);
        if (!s || s.erasedAt !== null) continue; // a subagent's, erased with its parent
        for (const child of await this.sessionAndChildren(id)) ids.push(child);
        await this.host.eraseSession(id);
      }
      if (page.length < PAGE) break;
      after = page.at(-1);
    }
    const unique = [...new Set(ids)];
    return this.finish(
      'before',
      new Date(before).toISOString(),
      actor,
      { scope: 'before', sessionIds: unique, before },
      {
        sessions: unique.length,
      },
    );
  }

  /**
   * Scans every table of the store (found in its catalog) and every participant for the ids and
   * strings: the places that hold one. An id of an erased session adds its runs' ids (its
   * tombstone keeps them). Clean when every place found is one erasure keeps by design.
   */
  async verify(q: { ids?: readonly string[]; strings?: readonly string[] }): Promise<ErasureReport> {
    const given = [...(q.ids ?? []), ...(q.strings ?? [])];
    if (given.length === 0) throw new FieldValidationError('ids', 'give at least one id or string to look for');
    for (const n of given)
      if (n.length < MIN_NEEDLE_LENGTH)
        throw new FieldValidationError('strings', `"${n}" is shorter than ${MIN_NEEDLE_LENGTH} characters`);
    const needles = new Set(given);
    for (const id of q.ids ?? []) {
      const s = await this.host.store.sessions.get(id);
      if (s?.erasedAt != null)
        for (const r of await this.host.store.runs.list({ sessionId: id, limit: 10_000 })) needles.add(r.id);
    }
    if (needles.size > MAX_NEEDLES)
      throw new FieldValidationError('ids', `at most ${MAX_NEEDLES} ids and strings at once (${needles.size} given)`);
    const list = [...needles];
    const findings = [...(await this.host.store.erasure.scan(list))];
    for (const p of this.host.participants)
      findings.push(...(await p.scan(list)).map((f) => ({ ...f, table: `${p.name}:${f.table}` })));
    const remnants = findings.filter((f) => f.kept === undefined);
    return {
      clean: remnants.length === 0,
      needles: list,
      remnants,
      kept: findings.filter((f) => f.kept !== undefined),
      participants: this.host.participants.map((p) => p.name),
    };
  }

  /**
   * Physical remnants: what the store can do about copies of erased rows left in its files (see
   * store.erasure.purge); `vacuum` rebuilds them (SQLite) or vacuums every table (PostgreSQL).
   */
  purge(options: { vacuum?: boolean } = {}): Promise<string> {
    return this.host.store.erasure.purge(options);
  }

  /** The erasure audit, newest first. */
  list(page: { before?: string; limit?: number } = {}): Promise<ErasureRecord[]> {
    return this.host.store.erasure.list({ limit: page.limit ?? 100, ...(page.before ? { before: page.before } : {}) });
  }

  /** The participants' part, then the audit record. */
  private async finish(
    scope: ErasureScope,
    target: string,
    actor: ErasureActor,
    reached: ErasureTarget,
    counts: Record<string, number>,
  ): Promise<ErasureResult> {
    for (const p of this.host.participants)
      for (const [kind, n] of Object.entries(await p.erase(reached))) counts[`${p.name}.${kind}`] = n;
    const record: ErasureRecord = {
      id: newId(),
      scope,
      targetHash: erasureTargetHash(scope, target),
      by: actor.by ?? 'operator',
      at: this.host.clock.now(),
      counts,
    };
    await this.host.store.erasure.record(record);
    const physical = await this.host.store.erasure.purge();
    return { ...record, sessionIds: [...reached.sessionIds], physical };
  }

  /** The session and, recursively, its runs' subagent sessions (what rt.sessions.erase erases with it). */
  private async sessionAndChildren(sessionId: string): Promise<string[]> {
    const out = [sessionId];
    for (let i = 0; i < out.length; i++) {
      for (const run of await this.host.store.runs.list({ sessionId: out[i]!, limit: 10_000 }))
        for (const child of await this.host.store.runs.list({ parentRunId: run.id, limit: 10_000 }))
          if (!out.includes(child.sessionId)) out.push(child.sessionId);
    }
    return out;
  }

  /** Every session of the query not erased yet. */
  private async allSessions(q: { tenant?: string }): Promise<string[]> {
    const ids: string[] = [];
    for (let after: string | undefined; ;) {
      const page = await this.host.store.erasure.sessions({ ...q, limit: PAGE, ...(after ? { after } : {}) });
      ids.push(...page);
      if (page.length < PAGE) return ids;
      after = page.at(-1);
    }
  }
}
