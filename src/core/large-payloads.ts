/**
 * Large payloads (issue 42, ADR-0040): a tool result above a threshold is stored once by content
 * hash, out of its event, and the model sees what the policy gives it: the whole content, or its
 * first bytes with the reference and the size, so that it (or a tool) can ask for more. The loop
 * applies the view to the results it adds to its conversation; the session log applies the same
 * view when it rebuilds the context from the log (src/session/large-payloads.ts), so that the
 * prompt a run sent and the one rebuilt for the replay check are the same.
 */
import type { ToolOutput } from '../model/index.ts';
import { jsonBytesAtMost } from './json-size-bound.ts';
import { contentHash } from './prompt-hash.ts';

/** What the model sees of a large payload: all of it, or its first `truncateTo` bytes (UTF-8) and the reference. */
export type PayloadModelView = 'whole' | { truncateTo: number };

export interface LargePayloadPolicy {
  /** A tool result, an attachment or a message text of this many bytes or more is stored apart, by content hash. */
  thresholdBytes: number;
  /** What the model sees of a large tool result. */
  modelView: PayloadModelView;
  /** The most an event may hold once its large payloads are apart (JSON, UTF-8 bytes): above, it is refused (`event_too_large`). */
  maxEventBytes: number;
  /** The most one payload may hold (UTF-8 bytes of its stored text): above, its event is refused (`event_too_large`). */
  maxPayloadBytes: number;
}

export const DEFAULT_LARGE_PAYLOADS: LargePayloadPolicy = {
  thresholdBytes: 256 * 1024,
  modelView: { truncateTo: 32 * 1024 },
  maxEventBytes: 8 * 1024 * 1024,
  maxPayloadBytes: 256 * 1024 * 1024,
};

/** A policy with its defaults filled in, checked (a TypeError names the bad setting). */
export function largePayloadPolicy(options: Partial<LargePayloadPolicy> = {}): LargePayloadPolicy {
  const p = { ...DEFAULT_LARGE_PAYLOADS, ...options };
  const positive = (name: string, v: number) => {
    if (!Number.isSafeInteger(v) || v < 1) throw new TypeError(`largePayloads.${name} must be a positive integer`);
  };
  positive('thresholdBytes', p.thresholdBytes);
  positive('maxEventBytes', p.maxEventBytes);
  positive('maxPayloadBytes', p.maxPayloadBytes);
  if (p.modelView !== 'whole') positive('modelView.truncateTo', p.modelView.truncateTo);
  return p;
}

/** The content of a tool output as it is stored apart: its text, media type, size and hash. */
export interface PayloadContent {
  text: string;
  mediaType: string;
  bytes: number;
  hash: string;
}

export const TEXT_MEDIA_TYPE = 'text/plain; charset=utf-8';
export const JSON_MEDIA_TYPE = 'application/json';

const contents = new WeakMap<object, PayloadContent | null>();

/**
 * The content of a text or JSON tool output (the text itself, or the JSON text of the value), once
 * per output object: the loop and the log both ask for it, and hashing 50 MB twice costs.
 */
export function toolOutputContent(output: ToolOutput): PayloadContent | undefined {
  if (output.type === 'error') return undefined;
  let c = contents.get(output);
  if (c === undefined) {
    const text = output.type === 'text' ? output.value : JSON.stringify(output.value);
    if (typeof text !== 'string') c = null;
    else
      c = {
        text,
        mediaType: output.type === 'text' ? TEXT_MEDIA_TYPE : JSON_MEDIA_TYPE,
        bytes: Buffer.byteLength(text),
        hash: contentHash(text),
      };
    contents.set(output, c);
  }
  return c ?? undefined;
}

/** How big a tool output's content is (UTF-8 bytes), without hashing it; 0 for an error. */
export function toolOutputBytes(output: ToolOutput): number {
  const known = contents.get(output);
  if (known) return known.bytes;
  if (output.type === 'text') return typeof output.value === 'string' ? Buffer.byteLength(output.value) : 0;
  if (output.type !== 'json') return 0;
  // The loop and the log both ask: a JSON value is serialized once.
  let bytes = jsonBytes.get(output);
  if (bytes === undefined) jsonBytes.set(output, (bytes = Buffer.byteLength(JSON.stringify(output.value) ?? '')));
  return bytes;
}

const jsonBytes = new WeakMap<object, number>();

/**
 * Whether a tool output's content is under `bytes` (UTF-8): at once for the small outputs of most
 * steps (an upper bound of their size, json-size-bound.ts), exactly (serialized once) otherwise.
 */
export function toolOutputBelow(output: ToolOutput, bytes: number): boolean {
  if (output.type === 'text' && typeof output.value === 'string' && 3 * output.value.length < bytes) return true;
  if (output.type === 'json' && !contents.has(output) && jsonBytesAtMost(output.value, bytes) < bytes) return true;
  return toolOutputBytes(output) < bytes;
}

/**
 * The longest prefix of `text` that has at most `bytes` UTF-8 bytes, cut between characters.
 * `text` may itself be a prefix of the content (at least `bytes` characters of it, or all of it):
 * the result is the same, which lets a store read only the first characters of a large blob.
 */
export function utf8Prefix(text: string, bytes: number): string {
  let head = text.length > bytes ? text.slice(0, bytes) : text;
  // A slice may end between the two halves of a surrogate pair: leave the half out.
  const last = head.charCodeAt(head.length - 1);
  if (head.length < text.length && last >= 0xd800 && last <= 0xdbff) head = head.slice(0, -1);
  const buf = Buffer.from(head);
  if (buf.length <= bytes) return head;
  let cut = bytes;
  // Back to the start of the character the cut falls in (a UTF-8 continuation byte is 10xxxxxx).
  while (cut > 0 && (buf[cut]! & 0xc0) === 0x80) cut--;
  return buf.subarray(0, cut).toString();
}

/** What a large payload's reference says of it. */
export interface PayloadRef {
  hash: string;
  bytes: number;
  mediaType: string;
}

/** The truncated view of a large tool result: its first bytes, then where the rest is. */
export function truncatedOutput(head: string, ref: PayloadRef, truncateTo: number): ToolOutput {
  const shown = utf8Prefix(head, truncateTo);
  const shownBytes = Buffer.byteLength(shown);
  return {
    type: 'text',
    value:
      `${shown}\n\n[truncated by Keel: the first ${shownBytes} of ${ref.bytes} bytes (${ref.mediaType}); ` +
      `the whole result is blob ${ref.hash}]`,
  };
}

/**
 * What the model sees of a tool output under `policy`: the output itself, unless it is large and
 * the view truncates it.
 */
export function toolOutputView(output: ToolOutput, policy: LargePayloadPolicy | undefined): ToolOutput {
  if (!policy || policy.modelView === 'whole' || output.type === 'error') return output;
  if (toolOutputBelow(output, policy.thresholdBytes)) return output;
  const c = toolOutputContent(output)!;
  return truncatedOutput(c.text, { hash: c.hash, bytes: c.bytes, mediaType: c.mediaType }, policy.modelView.truncateTo);
}

/**
 * A tool's result within the policy's bounds: over them (a large payload over `maxPayloadBytes`, a
 * smaller one over `maxEventBytes`), the call's result is an error saying so, which the model sees
 * and the log records, instead of an event the log would refuse (and the run fail on).
 */
export function boundedOutput(output: ToolOutput, policy: LargePayloadPolicy | undefined): ToolOutput {
  if (!policy || output.type === 'error') return output;
  // Under the threshold and the event bound: most results, told without serializing them.
  if (toolOutputBelow(output, Math.min(policy.thresholdBytes, policy.maxEventBytes + 1))) return output;
  const bytes = toolOutputBytes(output);
  const limit = bytes >= policy.thresholdBytes ? policy.maxPayloadBytes : policy.maxEventBytes;
  if (bytes <= limit) return output;
  return {
    type: 'error',
    code: 'execution_error',
    message: `the tool's result of ${bytes} bytes is over the limit of ${limit} bytes: it was not recorded`,
  };
}
