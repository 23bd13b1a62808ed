import { parseArgs, type ParseArgsConfig } from 'node:util';

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** parseArgs with usage errors that name the command. */
export function args<T extends NonNullable<ParseArgsConfig['options']>>(command: string, argv: string[], options: T) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(`${command}: ${(e as Error).message}`);
  }
}

export interface Io {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  err: NodeJS.WritableStream & { isTTY?: boolean };
  /** Standard input (import from `-`, the chat's lines); process.stdin when left out. */
  in?: NodeJS.ReadableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Resolves on SIGINT/SIGTERM (long-running commands stop on it). */
  signal: AbortSignal;
}

export const line = (io: Io, s = '') => io.out.write(`${s}\n`);
export const json = (io: Io, v: unknown) => io.out.write(`${JSON.stringify(v, null, io.out.isTTY ? 2 : 0)}\n`);
