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
    // The core loop must not know about storage, HTTP or the CLI (docs/architecture.md).
    files: ['src/core/**/*.ts', 'src/model/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['**/store/**', '**/server/**', '**/cli/**', '**/session/**', '**/runs/**'], message: 'core and model must not depend on outer layers' },
          { group: ['better-sqlite3', 'pg', 'node:http', 'hono', 'fastify'], message: 'core and model must not depend on I/O adapters' },
        ],
      }],
    },
  },
);
