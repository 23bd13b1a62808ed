/** What one SQLite migration is: its version (the database's `user_version` after it), its SQL, and code to run after the SQL. */
import type Database from 'better-sqlite3';

export interface SqliteMigration {
  version: number;
  sql: string;
  run?: (db: Database.Database) => void;
}
