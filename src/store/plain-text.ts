/**
 * Text a store keeps as text (ids, names, titles, URLs, secrets) never holds U+0000 (NUL):
 * PostgreSQL's `text` cannot, so no backend takes it, and both refuse it the same way (a
 * `validation` error naming the field, HTTP 400). Content (messages, metadata, payloads, answers,
 * tool results) is JSON, kept JSON-escaped: NUL there is stored and read back intact everywhere.
 */
import { StoreError } from './port/index.ts';

export const NUL_REFUSAL = 'must not contain the NUL character (U+0000)';

export const hasNul = (s: string): boolean => s.includes('\u0000');

/** Throws a `validation` error naming `field` when `value` holds NUL. */
export function refuseNul(field: string, value: string | null | undefined): void {
  if (typeof value === 'string' && hasNul(value)) throw new StoreError('validation', `${field}: ${NUL_REFUSAL}`);
}
