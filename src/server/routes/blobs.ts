/**
 * `GET /v1/blobs/{hash}`: content the log refers to by hash (a large tool result, an attachment,
 * ADR-0040), served to a tenant one of whose sessions refers to it, with its size, its media type
 * and byte ranges (RFC 9110: one range, 206; an unsatisfiable one, 416).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { AppContext, AppEnv } from '../context.ts';
import { problem } from '../openapi.ts';
import { HttpProblem, problemResponse } from '../problems.ts';
import { byteRange } from '../byte-range.ts';

const HASH = /^sha256:[0-9a-f]{64}$/;

const HashParam = z.object({
  hash: z
    .string()
    .regex(HASH, 'a blob hash is sha256: and 64 lowercase hex digits')
    .openapi({ param: { name: 'hash', in: 'path' }, example: `sha256:${'0'.repeat(64)}` }),
});

/** What a blob holding no media type is: the JSON of an event field. */
const JSON_TYPE = 'application/json';

export function blobRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/blobs/{hash}',
      tags: ['sessions'],
      summary: 'Content the log refers to by hash (a large tool result, an attachment), whole or a byte range',
      description:
        'Served to a tenant one of whose sessions refers to it (another tenant’s answer blob_not_found). ' +
        '`Range: bytes=…` (one range) answers 206 with Content-Range; a range past the end answers 416. ' +
        'An attachment stored as base64 is served as its bytes.',
      request: {
        params: HashParam,
        headers: z.object({ range: z.string().optional().describe('bytes=start-end, bytes=start- or bytes=-suffix') }),
      },
      responses: {
        200: {
          description: 'The whole content, with its media type',
          content: { 'application/octet-stream': { schema: z.string().openapi({ format: 'binary' }) } },
        },
        206: {
          description: 'The range asked for (Content-Range says which)',
          content: { 'application/octet-stream': { schema: z.string().openapi({ format: 'binary' }) } },
        },
        400: problem('Not a blob hash'),
        401: problem('Missing or invalid API key'),
        404: problem('No such blob referred to by a session of this tenant (blob_not_found)'),
        416: problem('The range starts past the end (range_not_satisfiable)'),
      },
    }),
    async (c) => {
      const { hash } = c.req.valid('param');
      const notFound = () =>
        new HttpProblem('blob_not_found', 'no session of this tenant refers to a blob with this hash');
      const blob = await ctx.rt.sessions.blob(hash, c.get('tenant'));
      if (!blob) throw notFound();
      const meta = blob.info;
      const bytes = meta?.encoding === 'base64' ? Buffer.from(blob.data, 'base64') : Buffer.from(blob.data);
      const headers: Record<string, string> = {
        'content-type': meta?.mediaType ?? JSON_TYPE,
        'accept-ranges': 'bytes',
        etag: `"${hash}"`,
        // Content-addressed: what a hash names never changes.
        'cache-control': 'private, max-age=31536000, immutable',
      };
      const range = byteRange(c.req.header('range'), bytes.length);
      if (range === 'unsatisfiable') {
        c.header('content-range', `bytes */${bytes.length}`);
        return problemResponse(
          c,
          'range_not_satisfiable',
          `the range starts past the end of the blob's ${bytes.length} bytes`,
          {
            hash,
            size: bytes.length,
          },
        );
      }
      if (range === undefined) {
        headers['content-length'] = String(bytes.length);
        return c.body(new Uint8Array(bytes), 200, headers);
      }
      const part = bytes.subarray(range.start, range.end + 1);
      headers['content-length'] = String(part.length);
      headers['content-range'] = `bytes ${range.start}-${range.end}/${bytes.length}`;
      return c.body(new Uint8Array(part), 206, headers);
    },
  );
}
