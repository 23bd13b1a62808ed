/**
 * Generates `src/client/schema.ts`, the types of `keel/client`, from the OpenAPI document the app
 * serves at `/openapi.json` (ADR-0038, decision 6): the app is built in this process on a throwaway
 * runtime (an in-memory SQLite store), the document is read from it, openapi-typescript turns it
 * into types and prettier formats them as the repository does.
 *
 *   npm run client:types          writes src/client/schema.ts
 *
 * test/client/types.test.ts regenerates the file from a running server's document and fails when
 * it differs from the committed one.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import * as prettier from 'prettier';
import { defineAgent } from '../src/core/index.ts';
import { ScriptedModel } from '../src/model/index.ts';
import { createRuntime } from '../src/runs/index.ts';
import { createApp } from '../src/server/app.ts';
import { openSqliteStore } from '../src/store/sqlite/index.ts';

/** Where the generated types live. */
export const CLIENT_TYPES_FILE = fileURLToPath(new URL('../src/client/schema.ts', import.meta.url));

const HEADER = `/**
 * The types of Keel's HTTP API, generated from its OpenAPI document (\`/openapi.json\`) by
 * openapi-typescript. Do not edit: after a change to a route, run \`npm run client:types\`
 * (test/client/types.test.ts fails while this file and the served document disagree).
 */
`;

/** The OpenAPI document the app serves, from an app built in this process (no listening socket). */
export async function servedDocument(): Promise<OpenAPI3> {
  const store = openSqliteStore({ path: ':memory:' });
  const runtime = createRuntime({
    store,
    agents: [defineAgent({ name: 'client-types', model: new ScriptedModel([{ text: 'ok' }]) })],
  });
  const { app, close } = createApp({ runtime, auth: 'off', version: '0.0.0' });
  try {
    const res = await app.request('/openapi.json');
    if (res.status !== 200) throw new Error(`/openapi.json answered ${res.status}`);
    return (await res.json()) as OpenAPI3;
  } finally {
    close();
    await runtime.close();
    await store.close();
  }
}

/** The text of `src/client/schema.ts` for a document: openapi-typescript's output, formatted. */
export async function clientTypes(doc: OpenAPI3): Promise<string> {
  const ast = await openapiTS(doc, { silent: true });
  const options = (await prettier.resolveConfig(CLIENT_TYPES_FILE)) ?? {};
  return prettier.format(HEADER + astToString(ast), { ...options, filepath: CLIENT_TYPES_FILE });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CLIENT_TYPES_FILE, await clientTypes(await servedDocument()));
  console.log(`wrote ${CLIENT_TYPES_FILE}`);
}
