/** Archive stores for tests: a temporary directory, and a bucket of a local S3 server (s3rver; never the network). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { DirectoryArchiveStore, S3ArchiveStore, type ArchiveStore } from '../../src/index.ts';

export interface TestArchive {
  store: ArchiveStore;
  close(): Promise<void>;
}

export function directoryArchive(): TestArchive {
  const dir = mkdtempSync(join(tmpdir(), 'keel-archive-'));
  return { store: new DirectoryArchiveStore(dir), close: async () => rmSync(dir, { recursive: true, force: true }) };
}

export async function s3Archive(bucket = 'keel-archive'): Promise<TestArchive> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-s3rver-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir });
  const { port } = await server.run();
  const s3 = new S3Client({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  return {
    store: new S3ArchiveStore({ bucket, prefix: 'keel/', s3 }),
    close: async () => {
      s3.destroy();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
