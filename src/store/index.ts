export * from './port.ts';
export { SqliteStore, openSqliteStore, defaultDbPath, type SqliteStoreOptions } from './sqlite/store.ts';
export { latestSchemaVersion } from './sqlite/migrations.ts';
