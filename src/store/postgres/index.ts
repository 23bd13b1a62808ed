export { openPostgresStore, PostgresStore, type PostgresStoreOptions } from './store.ts';
export { latestSchemaVersion as latestPostgresSchemaVersion } from './migrations.ts';
