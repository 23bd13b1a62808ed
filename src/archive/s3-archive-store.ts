/** An archive store in S3-compatible object storage, with the AWS SDK's client (see ArchiveStore). */
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  NotFound,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { checkedKey, type ArchiveStore } from './archive-store.ts';

export interface S3ArchiveStoreOptions {
  bucket: string;
  /** Prepended to every key (`keel/` say); none by default. */
  prefix?: string;
  /** A client of your own; else one made from `client` options (region, endpoint, credentials, forcePathStyle). */
  s3?: S3Client;
  client?: S3ClientConfig;
}

/** Each key is an object `prefix + key` of the bucket. The SDK's credentials chain applies unless credentials are given. */
export class S3ArchiveStore implements ArchiveStore {
  readonly name: string;
  private readonly s3: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(options: S3ArchiveStoreOptions) {
    if (!options.bucket) throw new TypeError('an S3 archive store needs a bucket');
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? '';
    this.s3 = options.s3 ?? new S3Client(options.client ?? {});
    this.name = `s3:${this.bucket}/${this.prefix}`;
  }

  private object(key: string): string {
    return this.prefix + checkedKey(key);
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.object(key), Body: bytes }));
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const r = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.object(key) }));
      return r.Body ? await r.Body.transformToByteArray() : new Uint8Array();
    } catch (e) {
      if (e instanceof NoSuchKey || (e as { name?: string }).name === 'NoSuchKey') return undefined;
      throw e;
    }
  }

  async delete(key: string): Promise<boolean> {
    const object = this.object(key);
    // S3 answers a delete of nothing as a success: whether there was something is asked first.
    try {
      await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: object }));
    } catch (e) {
      if (e instanceof NotFound || (e as { name?: string }).name === 'NotFound') return false;
      throw e;
    }
    await this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: object }));
    return true;
  }

  async list(prefix = ''): Promise<string[]> {
    const keys: string[] = [];
    for (let token: string | undefined; ;) {
      const r = await this.s3.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: this.prefix + prefix,
          ...(token ? { ContinuationToken: token } : {}),
        }),
      );
      for (const o of r.Contents ?? []) if (o.Key) keys.push(o.Key.slice(this.prefix.length));
      if (!r.IsTruncated || !r.NextContinuationToken) return keys;
      token = r.NextContinuationToken;
    }
  }
}
