import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { AppEnv } from '../context.ts';
import { problemResponse } from '../problems.ts';

/**
 * The inspector (docs/adr/0012-inspector-stack.md): a static web app, built by `npm run build`
 * into dist/inspector, served here at `/inspect`. Its files need no API key (they hold no data);
 * the app asks for one and talks to the public API like any other client. Any path under
 * `/inspect/` that is not a file is one of the app's own pages: it gets index.html.
 */
export function inspectorRoutes(app: OpenAPIHono<AppEnv>, o: { dir?: string } = {}): void {
  let built = o.dir ?? builtInspectorDir();
  const serve = async (c: Context<AppEnv>) => {
    // Built after the server started (npm run build in another terminal): found at the next request.
    built ??= builtInspectorDir();
    const root = built;
    if (root === undefined) return notBuilt(c);
    let rel: string;
    try {
      rel = decodeURIComponent(c.req.path.replace(/^\/inspect\/?/, ''));
    } catch {
      // Not valid percent-encoding: no file has that name.
      return missing(c);
    }
    const file = normalize(join(root, rel));
    // Nothing outside the built folder, however the path is spelled.
    if (file !== root && !file.startsWith(root.endsWith(sep) ? root : root + sep)) return missing(c);
    const isFile = rel !== '' && (await stat(file).catch(() => undefined))?.isFile() === true;
    if (isFile) {
      // Vite names every asset by its content hash: it never changes, so caches may keep it.
      const hashed = rel.startsWith('assets/');
      return c.body(await readFile(file), 200, {
        'content-type': TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream',
        'cache-control': hashed ? 'public, max-age=31536000, immutable' : 'no-cache',
        'x-content-type-options': 'nosniff',
      });
    }
    // A missing asset is a 404, not the app (a stale page asking for an old bundle must see it fail).
    if (rel.startsWith('assets/') || extname(rel) !== '') return missing(c);
    const index = await readFile(join(root, 'index.html')).catch(() => undefined);
    if (index === undefined) return notBuilt(c);
    return c.body(index, 200, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-cache',
      'x-content-type-options': 'nosniff',
    });
  };
  app.get('/inspect', serve);
  app.get('/inspect/*', serve);
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** Where `npm run build` put the inspector: dist/inspector of this package, from src/ or from dist/. */
export function builtInspectorDir(): string | undefined {
  const candidates = [
    new URL('../../../dist/inspector/', import.meta.url),
    new URL('../../inspector/', import.meta.url),
  ];
  for (const url of candidates) {
    const dir = fileURLToPath(url).replace(/[\\/]$/, '');
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return undefined;
}

const missing = (c: Context<AppEnv>) => problemResponse(c, 'not_found', `the inspector has no file ${c.req.path}`);

/** A checkout that was never built: say what to do instead of failing. */
function notBuilt(c: Context<AppEnv>) {
  return c.html(
    '<!doctype html><meta charset="utf-8"><title>Keel inspector not built</title>' +
      '<h1>The inspector is not built</h1><p>Run <code>npm run build</code> (it builds <code>dist/inspector</code>), then reload this page.</p>' +
      '<p>The API itself works: see <a href="/openapi.json">/openapi.json</a>.</p>',
    404,
    { 'cache-control': 'no-cache' },
  );
}
