/**
 * Large payloads in the log (issue 42, ADR-0040): a tool result's content, a user message's text
 * or attachment at or above the policy's threshold is stored once by content hash (a blob), and
 * the event holds a reference with its size and media type in its place:
 *
 *   { "$blob": "sha256:…", "size": 52428800, "mediaType": "text/plain; charset=utf-8" }
 *
 * (`"encoding": "base64"` too for an attachment's file, whose blob is its base64 text). The same
 * blobs as the small `{ "$blob" }` references of blobs.ts, with the same erasure; what differs is
 * that a reader may leave them out: the model context reads a large tool result through the
 * policy's view (its first bytes and the reference), without reading the rest.
 */
import {
  toolOutputBelow,
  toolOutputContent,
  truncatedOutput,
  TEXT_MEDIA_TYPE,
  type LargePayloadPolicy,
  type PayloadModelView,
} from '../core/index.ts';
import type { FilePart, TextPart, ToolOutput, UserMessage } from '../model/index.ts';
import type { BlobStore, NewBlob } from '../store/index.ts';
import { blobHash, MissingBlobError } from './blobs.ts';

/** A large payload's reference, in its event in place of the content. */
export interface LargeRef {
  $blob: string;
  /** Bytes of the content (decoded, for a base64 file). */
  size: number;
  mediaType: string;
  encoding?: 'base64';
}

const REF_KEYS = new Set(['$blob', 'size', 'mediaType', 'encoding']);

export const isLargeRef = (v: unknown): v is LargeRef => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const r = v as Partial<LargeRef>;
  if (typeof r.$blob !== 'string' || typeof r.size !== 'number' || typeof r.mediaType !== 'string') return false;
  for (const k in r) if (!REF_KEYS.has(k)) return false;
  return true;
};

/** Refused before anything is written: an event too large once its large payloads are apart, or a payload too large. */
export class EventTooLargeError extends Error {
  readonly code = 'event_too_large';
  readonly bytes: number;
  readonly limit: number;
  constructor(type: string, what: 'event' | 'payload', bytes: number, limit: number) {
    super(
      what === 'event'
        ? `a ${type} event of ${bytes} bytes (its large payloads apart) is over the limit of ${limit} bytes`
        : `a ${type} event holds a payload of ${bytes} bytes, over the limit of ${limit} bytes`,
    );
    this.name = 'EventTooLargeError';
    this.bytes = bytes;
    this.limit = limit;
  }
}

/** Event types whose data may hold large payloads, and which fields hold them (they stay in the event row). */
export const LARGE_PAYLOAD_FIELDS: Readonly<Record<string, string>> = {
  'tool/result': 'output',
  'user/message': 'message',
};

/**
 * Moves the large payloads of an event's data to blobs: a new data object where they were (the
 * data given is not changed), and the blobs to store. A JSON tool result whose value looks like a
 * reference always goes to a blob, so that reading back is unambiguous.
 */
export function offloadPayloads(
  type: string,
  data: Record<string, unknown>,
  policy: LargePayloadPolicy,
): { data: Record<string, unknown>; blobs: NewBlob[] } {
  const blobs: NewBlob[] = [];
  const limit = (bytes: number) => {
    if (bytes > policy.maxPayloadBytes) throw new EventTooLargeError(type, 'payload', bytes, policy.maxPayloadBytes);
  };
  if (type === 'tool/result') {
    const output = data.output as ToolOutput | undefined;
    if (!output || output.type === 'error') return { data, blobs };
    const lookalike = output.type === 'json' && isLargeRef(output.value);
    if (!lookalike && toolOutputBelow(output, policy.thresholdBytes)) return { data, blobs };
    const c = toolOutputContent(output)!;
    limit(c.bytes);
    blobs.push({ hash: c.hash, data: c.text, mediaType: c.mediaType });
    const ref: LargeRef = { $blob: c.hash, size: c.bytes, mediaType: c.mediaType };
    return { data: { ...data, output: { type: output.type, value: ref } }, blobs };
  }
  if (type === 'user/message') {
    const message = data.message as UserMessage | undefined;
    if (!message || !Array.isArray(message.content)) return { data, blobs };
    let content: Array<TextPart | FilePart | { type: string; [k: string]: unknown }> | undefined;
    message.content.forEach((part, i) => {
      let ref: LargeRef | undefined;
      let key: 'text' | 'data';
      if (part.type === 'text' && typeof part.text === 'string') {
        key = 'text';
        const bytes = Buffer.byteLength(part.text);
        if (bytes < policy.thresholdBytes) return;
        limit(bytes);
        const hash = blobHash(part.text);
        blobs.push({ hash, data: part.text, mediaType: TEXT_MEDIA_TYPE });
        ref = { $blob: hash, size: bytes, mediaType: TEXT_MEDIA_TYPE };
      } else if (part.type === 'file' && typeof part.data === 'string' && !URL_LIKE.test(part.data)) {
        key = 'data';
        if (part.data.length < policy.thresholdBytes) return;
        limit(part.data.length);
        const hash = blobHash(part.data);
        blobs.push({ hash, data: part.data, mediaType: part.mediaType, encoding: 'base64' });
        ref = {
          $blob: hash,
          size: Buffer.byteLength(part.data, 'base64'),
          mediaType: part.mediaType,
          encoding: 'base64',
        };
      } else return;
      content ??= message.content.slice();
      content[i] = { ...part, [key]: ref };
    });
    if (!content) return { data, blobs };
    return { data: { ...data, message: { ...message, content } }, blobs };
  }
  return { data, blobs };
}

/** A URL (`https:`, `data:`, …) rather than base64 text: a provider fetches it, Keel keeps it as it is. */
const URL_LIKE = /^[a-z][a-z0-9+.-]*:/i;

/** The large payload references of an event's data (after its small blobs were inflated), tool results' marked. */
function refsOf(type: string, data: unknown): Array<{ ref: LargeRef; toolOutput: boolean }> {
  if (typeof data !== 'object' || data === null) return [];
  if (type === 'tool/result') {
    const output = (data as { output?: { value?: unknown } }).output;
    return output && isLargeRef(output.value) ? [{ ref: output.value, toolOutput: true }] : [];
  }
  if (type === 'user/message') {
    const content = (data as { message?: { content?: unknown } }).message?.content;
    if (!Array.isArray(content)) return [];
    const out: Array<{ ref: LargeRef; toolOutput: boolean }> = [];
    for (const part of content as Array<Record<string, unknown>>) {
      const key = partKey(part);
      if (key && isLargeRef(part[key])) out.push({ ref: part[key], toolOutput: false });
    }
    return out;
  }
  return [];
}

const partKey = (part: Record<string, unknown>): 'text' | 'data' | undefined =>
  part.type === 'text' ? 'text' : part.type === 'file' ? 'data' : undefined;

/** The large payload references a stored event's data holds (in its row: see LogCodec.encode). */
export function largeRefsOf(type: string, data: unknown): LargeRef[] {
  return mayHoldLargePayloads(type) ? refsOf(type, data).map((r) => r.ref) : [];
}

/** Whether a decoded event's data holds a large payload reference (no allocation: every read asks). */
export function holdsLargeRefs(type: string, data: unknown): boolean {
  if (typeof data !== 'object' || data === null) return false;
  if (type === 'tool/result') return isLargeRef((data as { output?: { value?: unknown } }).output?.value);
  if (type !== 'user/message') return false;
  const content = (data as { message?: { content?: unknown } }).message?.content;
  if (!Array.isArray(content)) return false;
  for (const part of content as Array<Record<string, unknown>>) {
    const key = partKey(part);
    if (key && isLargeRef(part[key])) return true;
  }
  return false;
}

/** Whether decoding an event of this type may meet large payload references. */
export const mayHoldLargePayloads = (type: string): boolean => type in LARGE_PAYLOAD_FIELDS;

/**
 * Large payloads put back into decoded events' data: the data of each event, a new object where it
 * held references (the data given, which a store may keep, is never changed). `view` is how a tool
 * result is read: whole, or truncated (its first bytes, read without the rest, and the reference)
 * when it has `thresholdBytes` or more, as the loop shows it (`toolOutputView`); anything else is
 * read whole.
 */
export async function restorePayloads(
  events: ReadonlyArray<{ type: string; data: unknown }>,
  view: PayloadModelView,
  blobs: BlobStore,
  thresholdBytes = 0,
): Promise<unknown[]> {
  const truncates = (r: { ref: LargeRef; toolOutput: boolean }) =>
    view !== 'whole' && r.toolOutput && r.ref.size >= thresholdBytes;
  const whole = new Set<string>();
  const heads = new Set<string>();
  let any = false;
  for (const e of events) {
    if (!mayHoldLargePayloads(e.type)) continue;
    for (const r of refsOf(e.type, e.data)) {
      any = true;
      (truncates(r) ? heads : whole).add(r.ref.$blob);
    }
  }
  if (!any) return events.map((e) => e.data);
  const texts = whole.size > 0 ? await blobs.get([...whole]) : new Map<string, string>();
  const headTexts = new Map<string, string>();
  for (const h of heads) {
    const head = await blobs.head(h, (view as { truncateTo: number }).truncateTo);
    if (head === undefined) throw new MissingBlobError(h);
    headTexts.set(h, head);
  }
  const text = (hash: string): string => {
    const t = texts.get(hash);
    if (t === undefined) throw new MissingBlobError(hash);
    return t;
  };
  return events.map((e) => {
    if (!mayHoldLargePayloads(e.type) || typeof e.data !== 'object' || e.data === null) return e.data;
    if (e.type === 'tool/result') {
      const data = e.data as { output?: { type: 'text' | 'json'; value: unknown } };
      const output = data.output;
      if (!output || !isLargeRef(output.value)) return e.data;
      const ref = output.value;
      if (view !== 'whole' && truncates({ ref, toolOutput: true })) {
        const head = headTexts.get(ref.$blob)!;
        const shown = truncatedOutput(
          head,
          { hash: ref.$blob, bytes: ref.size, mediaType: ref.mediaType },
          view.truncateTo,
        );
        return { ...data, output: shown };
      }
      const t = text(ref.$blob);
      return { ...data, output: { type: output.type, value: output.type === 'json' ? (JSON.parse(t) as unknown) : t } };
    }
    const data = e.data as { message?: { content?: unknown } };
    const message = data.message;
    if (!message || !Array.isArray(message.content)) return e.data;
    const parts = message.content as Array<Record<string, unknown>>;
    let content: unknown[] | undefined;
    parts.forEach((part, i) => {
      const key = partKey(part);
      if (!key || !isLargeRef(part[key])) return;
      content ??= parts.slice();
      content[i] = { ...part, [key]: text(part[key].$blob) };
    });
    return content ? { ...data, message: { ...message, content } } : e.data;
  });
}
