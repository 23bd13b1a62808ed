import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-imports': 'off',
    },
  },
  {
    // The inspector runs in the browser and knows the server only by its public HTTP API, through
    // keel/client as any web app would (docs/adr/0012-inspector-stack.md, ADR-0038): of Keel's code,
    // keel/client alone (mapped to src/client by tsconfig.json and the inspector's vite.config.ts).
    files: ['inspector/**/*.{ts,tsx}'],
    ignores: ['inspector/vite.config.ts'],
    languageOptions: { globals: { ...globals.browser } },
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'keel', message: 'of Keel, the inspector imports keel/client only' }],
          patterns: [
            {
              group: ['**/src/**', 'node:*'],
              message: "the inspector uses the public HTTP API only (through keel/client), never the server's code",
            },
            { group: ['keel/*', '!keel/client'], message: 'of Keel, the inspector imports keel/client only' },
          ],
        },
      ],
    },
  },
  {
    // keel/client runs in browsers and Node (ADR-0038): no Node-only module, and of Keel's own code
    // only the feed positions (a file with no imports); test/client/portable.test.ts checks the same.
    files: ['src/client/**/*.ts'],
    languageOptions: { globals: { ...globals.browser } },
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['node:*'], message: 'keel/client runs in browsers too: no Node-only modules' },
            {
              regex: '^\\.\\./(?!session/feed-position\\.ts$)',
              message: 'keel/client knows the server by its HTTP API only (and the feed positions)',
            },
          ],
        },
      ],
    },
  },
  {
    // The core loop must not know about storage, HTTP or the CLI (docs/architecture.md).
    files: ['src/core/**/*.ts', 'src/model/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/store/**', '**/server/**', '**/cli/**', '**/session/**', '**/runs/**'],
              message: 'core and model must not depend on outer layers',
            },
            {
              group: ['better-sqlite3', 'pg', 'node:http', 'hono', 'fastify'],
              message: 'core and model must not depend on I/O adapters',
            },
          ],
        },
      ],
    },
  },
  {
    // Flow control sits between the storage port and the runs layer: it knows the port (store/limit-rows.ts),
    // the clock and the model's errors, never a backend, sessions, runs, HTTP or the CLI (docs/architecture.md).
    files: ['src/flow-control/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/store/sqlite/**', '**/store/pg/**', '**/store/postgres/**'],
              message: 'flow control uses the storage port, never a backend',
            },
            {
              group: ['**/server/**', '**/cli/**', '**/session/**', '**/runs/**'],
              message: 'flow control must not depend on the layers that use it',
            },
            {
              group: ['better-sqlite3', 'pg', 'node:http', 'hono'],
              message: 'storage drivers and HTTP belong elsewhere',
            },
          ],
        },
      ],
    },
  },
  {
    // Above the storage port, only the port: a backend is chosen where the program is put together
    // (cli/, the public entry point src/index.ts, tests), never by the layers that use storage.
    files: ['src/session/**/*.ts', 'src/runs/**/*.ts', 'src/server/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/store/sqlite/**', '**/store/pg/**', '**/store/postgres/**'],
              message: 'import the storage port (store/index.ts); backends are chosen in cli/, src/index.ts and tests',
            },
            { group: ['better-sqlite3', 'pg'], message: 'storage drivers belong to the backends under store/' },
            { group: ['**/cli/**'], message: 'the CLI is the outermost layer' },
          ],
        },
      ],
    },
  },
  {
    // The routes talk to the runtime, never to the store (serve.ts puts the server together).
    files: ['src/server/**/*.ts'],
    ignores: ['src/server/serve.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "MemberExpression[property.name='store']",
          message:
            'the server talks to the runtime (rt.sessions, rt.runs, rt.idempotency, rt.apiKeys), not to the store',
        },
      ],
    },
  },
);
