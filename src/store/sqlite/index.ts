/** The embedded SQLite backend of the storage port: chosen where a program is put together. */
export { SqliteStore, openSqliteStore, defaultDbPath, type SqliteStoreOptions } from './store.ts';
export { latestSchemaVersion } from './migrations.ts';
