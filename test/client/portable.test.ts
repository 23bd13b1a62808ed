/**
 * `keel/client` runs in browsers as well as in Node (ADR-0038): nothing it loads, its own files
 * and every file of Keel they import, may use a Node-only module or global. Walks the imports from
 * src/client/index.ts as TypeScript's scanner reads them, and looks into the two packages it uses.
 */
import { readFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const ENTRY = resolve(ROOT, 'src/client/index.ts');
/** The packages the client may import (and what they may import in turn: nothing of Node). */
const PACKAGES = ['openapi-fetch', 'eventsource-parser'];
const NODE_ONLY = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
/** Node's globals and CommonJS. */
const NODE_GLOBALS = new Set([
  'Buffer',
  'process',
  'require',
  'module',
  '__dirname',
  '__filename',
  'global',
  'setImmediate',
]);

/** The Node globals a file's code names (not as property names), and `import.meta.dirname`/`filename`. */
function nodeGlobals(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node) && NODE_GLOBALS.has(node.text)) {
      const p = node.parent;
      const isName =
        (ts.isPropertyAccessExpression(p) && p.name === node) ||
        ((ts.isPropertySignature(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p)) && p.name === node) ||
        (ts.isQualifiedName(p) && p.right === node);
      if (!isName) found.push(node.text);
    }
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isMetaProperty(node.expression) &&
      ['dirname', 'filename'].includes(node.name.text)
    )
      found.push(`import.meta.${node.name.text}`);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every file of Keel's the client loads, and the bare specifiers they import. */
function graph(): { files: string[]; bare: Map<string, string[]> } {
  const files: string[] = [];
  const bare = new Map<string, string[]>();
  const queue = [ENTRY];
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (files.includes(file)) continue;
    files.push(file);
    for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (fileName.startsWith('.')) queue.push(resolve(dirname(file), fileName));
      else bare.set(fileName, [...(bare.get(fileName) ?? []), relative(ROOT, file)]);
    }
  }
  return { files, bare };
}

describe('keel/client is portable', () => {
  it('imports only its own files, the feed positions and its two packages: no Node-only module or global', () => {
    const { files, bare } = graph();
    expect(files.map((f) => relative(ROOT, f)).sort()).toEqual([
      'src/client/follow.ts',
      'src/client/index.ts',
      'src/client/problems.ts',
      'src/client/schema.ts',
      'src/session/feed-position.ts',
    ]);
    expect([...bare.keys()].sort()).toEqual([...PACKAGES].sort());
    for (const file of files) expect(nodeGlobals(file), `${relative(ROOT, file)}: Node globals`).toEqual([]);
  });

  it('its packages import nothing of Node', () => {
    const require = createRequire(ENTRY);
    for (const name of PACKAGES) {
      const seen = new Set<string>();
      const queue = [require.resolve(name)];
      while (queue.length > 0) {
        const file = queue.shift()!;
        if (seen.has(file)) continue;
        seen.add(file);
        for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
          expect(NODE_ONLY.has(fileName), `${name} (${file}) imports ${fileName}`).toBe(false);
          if (fileName.startsWith('.')) queue.push(resolve(dirname(file), fileName));
        }
      }
    }
  });

  it('is the package export keel/client, built from src/client', () => {
    const pkg = JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as {
      exports: Record<string, { types: string; default: string }>;
      dependencies: Record<string, string>;
    };
    expect(pkg.exports['./client']).toEqual({ types: './dist/client/index.d.ts', default: './dist/client/index.js' });
    for (const name of PACKAGES) expect(pkg.dependencies[name], `${name} is a dependency`).toMatch(/^\d+\.\d+\.\d+$/);
    const build = JSON.parse(readFileSync(resolve(ROOT, 'tsconfig.build.json'), 'utf8')) as {
      include: string[];
      compilerOptions: { rootDir: string; outDir: string };
    };
    expect(build.include).toContain('src');
    expect(build.compilerOptions).toMatchObject({ rootDir: 'src', outDir: 'dist' });
  });
});
