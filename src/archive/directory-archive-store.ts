/** An archive store in a directory of the file system (see ArchiveStore). */
import { mkdir, open, readdir, readFile, rename, rm, unlink } from 'node:fs/promises';
import type { Dirent } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { randomUUID } from 'node:crypto';
import { checkedKey, type ArchiveStore } from './archive-store.ts';

/**
 * Each key is a file under the root directory (its segments are directories). A put writes a
 * temporary file, syncs it and renames it over the key: a reader sees the old bytes or the new,
 * never part of them.
 */
export class DirectoryArchiveStore implements ArchiveStore {
  readonly name: string;
  private readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
    this.name = `dir:${this.root}`;
  }

  private path(key: string): string {
    return join(this.root, ...checkedKey(key).split('/'));
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    const path = this.path(key);
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.${randomUUID()}.tmp`;
    const f = await open(tmp, 'w');
    try {
      await f.writeFile(bytes);
      await f.sync();
    } finally {
      await f.close();
    }
    try {
      await rename(tmp, path);
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      return new Uint8Array(await readFile(this.path(key)));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  async delete(key: string): Promise<boolean> {
    try {
      await unlink(this.path(key));
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw e;
    }
  }

  async list(prefix = ''): Promise<string[]> {
    let entries: Dirent[];
    try {
      entries = await readdir(this.root, { recursive: true, withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const keys: string[] = [];
    for (const d of entries) {
      if (!d.isFile()) continue;
      const key = relative(this.root, join(d.parentPath, d.name)).split(sep).join('/');
      if (key.endsWith('.tmp') || !key.startsWith(prefix)) continue;
      try {
        keys.push(checkedKey(key));
      } catch {
        // Not a key of this store (a file someone else put there).
      }
    }
    return keys;
  }
}
