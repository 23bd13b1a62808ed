import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The inspector's build (docs/adr/0012-inspector-stack.md): `npm run build` writes it to
 * dist/inspector, which `keel serve` serves at /inspect. JSX is compiled by Vite's own transform
 * (oxc) for Preact; no plugin is needed. The inspector's `keel/client` is its source, src/client
 * (the package export is dist/client, which a checkout may not have built): tsconfig.json maps it so too.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/inspect/',
  logLevel: 'warn',
  resolve: {
    alias: [{ find: /^keel\/client$/, replacement: fileURLToPath(new URL('../src/client/index.ts', import.meta.url)) }],
  },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../dist/inspector', import.meta.url)),
    emptyOutDir: true,
    sourcemap: true,
    target: 'es2022',
  },
  // `vite --config inspector/vite.config.ts` for development: the API of a local `npm start`.
  server: { proxy: { '/v1': 'http://127.0.0.1:8787' } },
});
