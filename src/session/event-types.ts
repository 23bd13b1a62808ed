import { z } from 'zod';
import { contentHash, type EventDataMap } from '../core/index.ts';
import type { EventEnvelope, Sequenced } from '../store/index.ts';
import { loopEventSchemas, requestHeaderV1, runEventSchemas, sessionEventSchemas } from './schemas.ts';

type Schemas = typeof sessionEventSchemas & typeof runEventSchemas;
export type SessionEventDataMap = EventDataMap & { [K in keyof Schemas]: z.infer<Schemas[K]> };
export type SessionEventType = keyof SessionEventDataMap;

/** A decoded event of the session log (the stored envelope, typed): upcast to the current version, validated, blobs inflated. */
export type SessionEvent<T extends SessionEventType = SessionEventType> = {
  [K in T]: Omit<EventEnvelope, 'type'> &
    Sequenced & {
      type: K;
      data: SessionEventDataMap[K];
    };
}[T];

export interface EventTypeDef {
  type: string;
  /** The current version: what writers write. */
  v: number;
  schema: z.ZodType;
  /** A conversational entry: it joins the tree and moves the leaf. */
  entry: boolean;
  /** For a non-entry event that moves the leaf: where to. */
  leafOf?: (data: never) => string | null;
  /** Top-level data fields that go to the blob table when large. */
  blobFields?: readonly string[];
  /** upcasters[n] turns data of version n into version n + 1. */
  upcasters?: Record<number, (data: unknown) => unknown>;
}

export class UnknownEventError extends Error {
  readonly code = 'unknown_event';
  constructor(type: string, v: number, seq: number) {
    super(
      `event #${seq} has type ${type} v${v}, which this Keel does not know and which is not marked ignorable: upgrade Keel to read this session`,
    );
    this.name = 'UnknownEventError';
  }
}

export class InvalidEventError extends Error {
  readonly code = 'invalid_event';
  readonly issues: string;
  constructor(type: string, issues: string) {
    super(`invalid ${type} event data: ${issues}`);
    this.name = 'InvalidEventError';
    this.issues = issues;
  }
}

const ENTRY_TYPES = new Set(['user/message', 'assistant/message', 'tool/result', 'compaction', 'branch/summary']);
const BLOB_FIELDS: Record<string, readonly string[]> = {
  'tool/result': ['output'],
  'user/message': ['message'],
  compaction: ['summary'],
  'branch/summary': ['summary'],
};

/** Which event types exist, at which version, and how to read older versions of each. */
export class EventRegistry {
  private readonly defs = new Map<string, EventTypeDef>();

  define(def: EventTypeDef): this {
    if (!(def.v >= 1)) throw new TypeError(`event type ${def.type}: version must be >= 1`);
    for (let v = 1; v < def.v; v++) {
      if (!def.upcasters?.[v]) throw new TypeError(`event type ${def.type}: no upcaster from v${v} to v${v + 1}`);
    }
    this.defs.set(def.type, def);
    return this;
  }

  get(type: string): EventTypeDef | undefined {
    return this.defs.get(type);
  }

  /** Validates data about to be written; returns it as the schema parsed it. */
  validate(type: string, data: unknown): { def: EventTypeDef; data: unknown } {
    const def = this.defs.get(type);
    if (!def) throw new InvalidEventError(type, 'unknown event type');
    const parsed = def.schema.safeParse(data);
    if (!parsed.success) throw new InvalidEventError(type, z.prettifyError(parsed.error));
    return { def, data: parsed.data };
  }

  /** The definition for data built by Keel's own typed code: known type, no schema check. */
  trusted(type: string, data: unknown): { def: EventTypeDef; data: unknown } {
    const def = this.defs.get(type);
    if (!def) throw new InvalidEventError(type, 'unknown event type');
    return { def, data };
  }

  /**
   * Brings stored data to the current version and validates it. Returns undefined for an event
   * this reader may skip (unknown or newer, but marked ignorable); throws for one it must not skip.
   */
  upcast(
    e: { type: string; v: number; seq: number; ignorable: boolean; data: unknown },
    options: { validate?: boolean } = {},
  ): { v: number; data: unknown } | undefined {
    const def = this.defs.get(e.type);
    if (!def || e.v > def.v) {
      if (e.ignorable) return undefined;
      throw new UnknownEventError(e.type, e.v, e.seq);
    }
    // Current data read back from the log was checked when it was written, or built by the typed
    // loop that needs no check (trusted appends, ADR-0008): the schema check is for upcast data,
    // and for whoever asks (import, the replay check).
    if (e.v === def.v && options.validate === false) return { v: def.v, data: e.data };
    let data = e.data;
    for (let v = e.v; v < def.v; v++) data = def.upcasters![v]!(data);
    const parsed = def.schema.safeParse(data);
    if (!parsed.success) throw new InvalidEventError(e.type, `#${e.seq}: ${z.prettifyError(parsed.error)}`);
    return { v: def.v, data: parsed.data };
  }
}

/**
 * request/header v1 → v2 (ADR-0008): the context by reference, system prompt and tools by content
 * hash; what v1 held inline stays readable as `legacy`, which the replay check verifies the v1 way.
 */
function requestHeaderV1toV2(data: unknown): unknown {
  const d = requestHeaderV1.parse(data);
  return {
    provider: d.provider,
    modelId: d.modelId,
    attempt: d.attempt,
    messageId: d.messageId,
    settings: d.settings,
    system: d.system === null ? null : contentHash(JSON.stringify(d.system)),
    tools: d.tools.length > 0 ? contentHash(JSON.stringify(d.tools)) : null,
    context: { messages: d.context.length, first: d.context[0] ?? null, last: d.context.at(-1) ?? null },
    promptHash: d.promptHash,
    legacy: { system: d.system, tools: d.tools, context: d.context },
  };
}

/** Event types at a version above 1, with the upcasters that read their older versions. */
const VERSIONS: Record<string, { v: number; upcasters: Record<number, (data: unknown) => unknown> }> = {
  'request/header': { v: 2, upcasters: { 1: requestHeaderV1toV2 } },
  // v2 (ADR-0015) only adds: run statuses sleeping and waiting_for_signal; pending sleeps and
  // signals; `by: 'deadline'` on decisions and answers. v1 data is v2 data as is; the bump tells an
  // older Keel that it cannot read what it does not know.
  'run/status': { v: 2, upcasters: { 1: (d) => d } },
  // turn/end v3, tool/approval v2 and tool/decision v3 (ADR-0018) only add `unknownOutcome`: an
  // approval asked for a call whose outcome a crash left unknown. Older data is current data as is.
  'turn/end': { v: 3, upcasters: { 1: (d) => d, 2: (d) => d } },
  'tool/approval': { v: 2, upcasters: { 1: (d) => d } },
  'tool/decision': { v: 3, upcasters: { 1: (d) => d, 2: (d) => d } },
  'user/answer': { v: 2, upcasters: { 1: (d) => d } },
};

/** The registry of every event type this version of Keel writes. */
export function defaultRegistry(): EventRegistry {
  const r = new EventRegistry();
  for (const [type, schema] of Object.entries({ ...loopEventSchemas, ...sessionEventSchemas, ...runEventSchemas })) {
    r.define({
      type,
      v: VERSIONS[type]?.v ?? 1,
      ...(VERSIONS[type] ? { upcasters: VERSIONS[type].upcasters } : {}),
      schema,
      entry: ENTRY_TYPES.has(type),
      ...(BLOB_FIELDS[type] ? { blobFields: BLOB_FIELDS[type] } : {}),
      ...(type === 'leaf/move' ? { leafOf: (d: { entryId: string | null }) => d.entryId } : {}),
    });
  }
  return r;
}
