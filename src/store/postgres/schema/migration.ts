/** What one PostgreSQL migration is: its version (recorded in `keel_schema`) and its SQL. */
export interface PostgresMigration {
  version: number;
  sql: string;
}
