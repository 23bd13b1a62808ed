import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Finds (or starts) the PostgreSQL server the PostgreSQL tests share.
    globalSetup: ['test/global-setup.ts'],
    // The CI machine is a slow shared 2-core box: keep timeouts generous and never assert on wall-clock speed.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
});
