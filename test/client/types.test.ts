/**
 * The client and the server agree: `src/client/schema.ts` is what openapi-typescript makes of the
 * OpenAPI document a running server serves (the same generation as `npm run client:types`), and
 * the client knows every problem type the server answers.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_TYPES_FILE, clientTypes, servedDocument } from '../../scripts/client-types.ts';
import { PROBLEM_TYPES } from '../../src/client/index.ts';
import { PROBLEMS } from '../../src/server/problems.ts';
import { startTestServer, type TestServer } from '../support/server-helpers.ts';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ keys: [{ tenant: 'acme' }] });
});
afterAll(() => srv?.close());

describe('keel/client and the OpenAPI document', () => {
  it('src/client/schema.ts is generated from the document the server serves', async () => {
    const res = await fetch(`${srv.url}/openapi.json`);
    expect(res.status).toBe(200);
    const served = await clientTypes(await res.json());
    const committed = readFileSync(CLIENT_TYPES_FILE, 'utf8');
    // Not toBe: on a difference, say what to do before the (long) diff.
    if (served !== committed)
      expect.fail(
        'src/client/schema.ts is not the types of the OpenAPI document the server serves: run `npm run client:types` and commit it',
      );
    // The script builds the app in its own process: the same types.
    expect(await clientTypes(await servedDocument())).toBe(served);
  });

  it('knows every problem type the server answers, and no other', () => {
    expect([...PROBLEM_TYPES].sort()).toEqual(Object.keys(PROBLEMS).sort());
  });
});
