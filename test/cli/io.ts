import { Readable, Writable } from 'node:stream';
import type { Io } from '../../src/cli/args.ts';
import { main } from '../../src/cli/main.ts';

/** A writable that keeps what was written; `isTTY` as asked. */
export function sink(tty = false): Writable & { isTTY?: boolean; text: () => string } {
  let text = '';
  const w = new Writable({
    write(chunk, _enc, cb) {
      text += String(chunk);
      cb();
    },
  }) as Writable & { isTTY?: boolean; text: () => string };
  if (tty) w.isTTY = true;
  w.text = () => text;
  return w;
}

export interface Captured {
  code: number;
  out: string;
  err: string;
}

/** Runs `keel <argv>` in-process with captured streams. */
export async function keel(
  argv: string[],
  o: { env?: NodeJS.ProcessEnv; stdin?: string; signal?: AbortSignal; tty?: boolean } = {},
): Promise<Captured> {
  const out = sink(o.tty);
  const err = sink(o.tty);
  const io: Io = {
    out,
    err,
    env: o.env ?? {},
    signal: o.signal ?? new AbortController().signal,
    ...(o.stdin !== undefined ? { in: Readable.from([Buffer.from(o.stdin)]) } : {}),
  };
  const code = await main(argv, io);
  return { code, out: out.text(), err: err.text() };
}

/** Runs a long command (events --follow) and lets the test read its output while it runs. */
export function keelLive(argv: string[], o: { env?: NodeJS.ProcessEnv } = {}) {
  const out = sink();
  const err = sink();
  const stop = new AbortController();
  const done = main(argv, { out, err, env: o.env ?? {}, signal: stop.signal });
  return {
    out: () => out.text(),
    err: () => err.text(),
    stop: async () => {
      stop.abort();
      return done;
    },
  };
}

/** Polls until `check` holds (no wall-clock assertion: a generous deadline only to fail clearly). */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
