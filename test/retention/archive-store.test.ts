/** The archive stores' contract: a directory and S3-compatible storage (a local s3rver) behave alike. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArchiveKeyError, keySegment } from '../../src/index.ts';
import { directoryArchive, s3Archive, type TestArchive } from './archive-stores.ts';

for (const kind of ['directory', 's3'] as const) {
  describe(`archive store (${kind})`, () => {
    let a: TestArchive;
    beforeAll(async () => {
      a = kind === 'directory' ? directoryArchive() : await s3Archive();
    });
    afterAll(() => a.close());

    it('puts, gets, lists and deletes bytes by key', async () => {
      const bytes = new Uint8Array([0, 1, 2, 250, 255]);
      await a.store.put('sessions/t1/one.jsonl.gz', bytes);
      await a.store.put('sessions/t2/two.jsonl.gz', new Uint8Array([7]));
      expect(await a.store.get('sessions/t1/one.jsonl.gz')).toEqual(bytes);
      expect((await a.store.list('sessions/')).sort()).toEqual([
        'sessions/t1/one.jsonl.gz',
        'sessions/t2/two.jsonl.gz',
      ]);
      expect(await a.store.list('sessions/t2/')).toEqual(['sessions/t2/two.jsonl.gz']);
      // A put replaces.
      await a.store.put('sessions/t2/two.jsonl.gz', new Uint8Array([8, 9]));
      expect(await a.store.get('sessions/t2/two.jsonl.gz')).toEqual(new Uint8Array([8, 9]));
      expect(await a.store.delete('sessions/t1/one.jsonl.gz')).toBe(true);
      expect(await a.store.delete('sessions/t1/one.jsonl.gz')).toBe(false);
      expect(await a.store.get('sessions/t1/one.jsonl.gz')).toBeUndefined();
      expect(await a.store.list('sessions/t1/')).toEqual([]);
    });

    it('refuses keys that are not relative paths of plain segments', async () => {
      for (const bad of ['', '/abs', 'a/../b', 'a//b', 'sp ace', '..', 'a/./b'])
        await expect(a.store.put(bad, new Uint8Array([1])), bad).rejects.toBeInstanceOf(ArchiveKeyError);
      await expect(a.store.get('../escape')).rejects.toBeInstanceOf(ArchiveKeyError);
      // Any text becomes a key segment.
      const seg = keySegment('tenant/with spaces & ünïcode');
      await a.store.put(`sessions/${seg}/x`, new Uint8Array([3]));
      expect(await a.store.get(`sessions/${seg}/x`)).toEqual(new Uint8Array([3]));
    });
  });
}
