import type { TestProject } from 'vitest/node';
import { findPostgres } from './support/postgres-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The PostgreSQL server of this test run (see test/support/postgres-server.ts). */
    keelPostgresUrl: string;
  }
}

/** Finds (or starts) the PostgreSQL server every test file of the run shares. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await findPostgres();
  project.provide('keelPostgresUrl', server.url);
  return () => server.stop();
}
