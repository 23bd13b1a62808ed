/**
 * `retention` in keel.config (docs/operations.md): the policies (RetentionSettings), the
 * archive store, and the sweeper's pace, checked field by field.
 */
import { resolve } from 'node:path';
import { DirectoryArchiveStore, S3ArchiveStore, type ArchiveStore } from '../archive/index.ts';
import { checkedRetentionSettings, RetentionPolicyError, type RetentionSettings } from './policy.ts';
import type { RetentionOptions } from './retention.ts';

/** Where archives go: a directory (relative to the config file), an S3 bucket, or a store of your own (JS/TS configs). */
export type ArchiveConfig =
  | { directory: string }
  | {
      s3: {
        bucket: string;
        prefix?: string;
        region?: string;
        /** An S3-compatible endpoint (MinIO, R2, …); AWS's by default. */
        endpoint?: string;
        forcePathStyle?: boolean;
      };
    }
  | ArchiveStore;

export interface RetentionConfig extends RetentionSettings {
  archive?: ArchiveConfig;
  /** Stores sessions were archived to before (still read to restore them). */
  formerArchives?: ArchiveConfig[];
  /** How often the sweeper runs. Default 60. */
  intervalMinutes?: number;
  /** Rows (or sessions) per transaction. Default 100. */
  batchSize?: number;
  /** A pause between batches (ms). Default 0. */
  pauseMs?: number;
  /** The share of the time a sweep works, 0 < d ≤ 1. Default 0.25. */
  dutyCycle?: number;
}

const SWEEPER_FIELDS = ['archive', 'formerArchives', 'intervalMinutes', 'batchSize', 'pauseMs', 'dutyCycle'];

function archiveStoreOf(c: unknown, at: string, baseDir: string): ArchiveStore {
  if (typeof c === 'object' && c !== null && 'put' in c && 'get' in c && 'delete' in c && 'list' in c)
    return c as ArchiveStore;
  if (typeof c === 'object' && c !== null && 'directory' in c && typeof c.directory === 'string' && c.directory !== '')
    return new DirectoryArchiveStore(resolve(baseDir, c.directory));
  if (typeof c === 'object' && c !== null && 's3' in c && typeof c.s3 === 'object' && c.s3 !== null) {
    const s3 = c.s3 as Record<string, unknown>;
    if (typeof s3.bucket !== 'string' || s3.bucket.length < 3)
      throw new RetentionPolicyError(`${at}.s3.bucket`, 'a bucket name (3 characters or more)');
    for (const k of ['prefix', 'region', 'endpoint'])
      if (s3[k] !== undefined && typeof s3[k] !== 'string') throw new RetentionPolicyError(`${at}.s3.${k}`, 'a string');
    return new S3ArchiveStore({
      bucket: s3.bucket,
      ...(typeof s3.prefix === 'string' ? { prefix: s3.prefix } : {}),
      client: {
        ...(typeof s3.region === 'string' ? { region: s3.region } : {}),
        ...(typeof s3.endpoint === 'string' ? { endpoint: s3.endpoint } : {}),
        ...(s3.forcePathStyle === true ? { forcePathStyle: true } : {}),
      },
    });
  }
  throw new RetentionPolicyError(
    at,
    '{ directory: "path" } or { s3: { bucket, prefix?, region?, endpoint?, forcePathStyle? } }',
  );
}

const positive = (at: string, v: unknown, min: number): number => {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min) throw new RetentionPolicyError(at, `a number ≥ ${min}`);
  return v;
};

/** The runtime's retention options from keel.config's `retention` (a RetentionPolicyError names the field at fault). */
export function retentionOptionsFromConfig(raw: unknown, baseDir: string): RetentionOptions {
  if (raw === undefined) return {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new RetentionPolicyError('retention', 'an object');
  const r = raw as Record<string, unknown>;
  const settings = checkedRetentionSettings(
    Object.fromEntries(Object.entries(r).filter(([k]) => !SWEEPER_FIELDS.includes(k))),
  );
  const out: RetentionOptions = { settings };
  if (r.archive !== undefined) out.archive = archiveStoreOf(r.archive, 'retention.archive', baseDir);
  if (r.formerArchives !== undefined) {
    if (!Array.isArray(r.formerArchives)) throw new RetentionPolicyError('retention.formerArchives', 'an array');
    out.formerArchives = r.formerArchives.map((a, i) => archiveStoreOf(a, `retention.formerArchives.${i}`, baseDir));
  }
  if (r.intervalMinutes !== undefined)
    out.intervalMs = positive('retention.intervalMinutes', r.intervalMinutes, 1) * 60_000;
  if (r.batchSize !== undefined) out.batchSize = Math.floor(positive('retention.batchSize', r.batchSize, 1));
  if (r.pauseMs !== undefined) out.pauseMs = positive('retention.pauseMs', r.pauseMs, 0);
  if (r.dutyCycle !== undefined) {
    const d = r.dutyCycle;
    if (typeof d !== 'number' || !(d > 0 && d <= 1))
      throw new RetentionPolicyError('retention.dutyCycle', 'a share of the time, more than 0 and at most 1');
    out.dutyCycle = d;
  }
  return out;
}
