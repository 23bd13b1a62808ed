import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { AppContext, AppEnv } from '../context.ts';
import { runFor, runJsonFor } from '../lookups.ts';
import { body, json, pathParam, problem } from '../openapi.ts';
import { StoreError } from '../../store/index.ts';
import { HttpProblem } from '../problems.ts';
import { RunSchema } from '../schemas.ts';

const Payload = z
  .unknown()
  .openapi({ description: "The signal's payload: any JSON value (the body itself); no body is null" });
const SignalParams = z.object({ id: pathParam('id'), name: pathParam('name') });
const TokenParam = z.object({ token: pathParam('token') });

/** The body as JSON, any value (no body: null). */
async function payloadOf(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new HttpProblem('bad_json', `the body is not valid JSON: ${(e as Error).message}`);
  }
}

/** Signals to waiting runs, by name (API key) or by callback token (none). */
export function waitRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/runs/{id}/signals/{name}',
      tags: ['runs'],
      summary:
        "Deliver a signal to a run: it ends the run's wait for it (the payload becomes the tool's result), or is kept until the wait starts. Exactly once per run and name.",
      request: {
        params: SignalParams,
        ...body(Payload, false),
      },
      responses: {
        200: json(
          z.object({
            signal: z.string(),
            consumed: z.boolean().describe('Whether a wait took it now (else it is kept for the wait)'),
            run: RunSchema,
          }),
          'Delivered',
        ),
        400: problem('The payload does not match the waiting call’s schema (validation), or is not JSON'),
        401: problem('Missing or invalid API key'),
        404: problem('No such run (or not yours)'),
        409: problem('Already delivered (already_delivered), or the run has ended (illegal_transition)'),
      },
    }),
    async (c) => {
      const { id, name } = c.req.valid('param');
      const run = await runFor(ctx, c, id);
      const r = await rt.runs.signal(run.id, name, await payloadOf(c), { source: 'api' });
      return c.json({ signal: name, consumed: r.consumed, run: await runJsonFor(ctx, r.run) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/callbacks/{token}',
      tags: ['runs'],
      summary: 'Deliver the signal a callback token stands for (no API key: the token authorizes). Exactly once.',
      security: [],
      request: { params: TokenParam, ...body(Payload, false) },
      responses: {
        200: json(z.object({ signal: z.string(), consumed: z.boolean() }), 'Delivered'),
        400: problem('The payload does not match the waiting call’s schema, or is not JSON'),
        404: problem('No such callback'),
        409: problem('Already delivered, or the run has ended'),
        429: problem('Too many requests from this address, or too many unknown tokens'),
      },
    }),
    async (c) => {
      // The token is the credential: an unknown one counts as a failed authentication of the
      // address (refused for the rest of the minute past the limit), as a bad API key would.
      const address = ctx.clientAddress(c);
      ctx.authFailures.check(address);
      const r = await rt.runs.callback(c.req.valid('param').token, await payloadOf(c)).catch((e: unknown) => {
        if (e instanceof StoreError && e.code === 'not_found') ctx.authFailures.failed(address);
        throw e;
      });
      return c.json({ signal: r.name, consumed: r.consumed }, 200);
    },
  );
}
