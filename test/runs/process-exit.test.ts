/** A process whose worker stopped exits by itself: no loop of the runtime (the batch runner included) keeps it alive. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

it('a process whose worker stopped exits by itself', async () => {
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('./fixtures/exit-after-worker-stop.ts', import.meta.url))],
    {
      stdio: 'ignore',
    },
  );
  const exited = await Promise.race([
    new Promise<number | null>((r) => child.once('exit', (code) => r(code))),
    new Promise<'hung'>((r) => setTimeout(() => r('hung'), 8_000)),
  ]);
  if (exited === 'hung') child.kill('SIGKILL');
  expect(exited).toBe(0);
});
