import { pino, type DestinationStream, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';

export type { Logger } from 'pino';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LoggerOptions {
  /** Default `info`; `silent` logs nothing. */
  level?: LogLevel;
  /**
   * Human-readable lines instead of JSON: default when the destination is a terminal. JSON lines
   * (one object a line, with `time`, `level`, `msg` and the ids) for everything else.
   */
  pretty?: boolean;
  /** Where lines go (default: stdout). */
  destination?: NodeJS.WritableStream & { isTTY?: boolean };
}

/** Checks a level named by a flag or an environment variable; a clear error for anything else. */
export function parseLogLevel(value: string, from: string): LogLevel {
  const level = value.trim().toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level))
    throw new Error(`${from} must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(value)}`);
  return level as LogLevel;
}

/**
 * Keel's structured logger (pino): JSON lines, each with the `session_id`, `run_id` and `trace_id`
 * it concerns (see `runLogger`), or pretty lines on a terminal. Written synchronously, so a line
 * logged before a crash is not lost in a buffer.
 */
export function createLogger(o: LoggerOptions = {}): Logger {
  const destination = o.destination ?? process.stdout;
  const pretty = o.pretty ?? destination.isTTY === true;
  const stream: DestinationStream = pretty
    ? pinoPretty({
        destination: destination as unknown as number,
        sync: true,
        colorize: destination.isTTY === true,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname',
      })
    : (destination as unknown as DestinationStream);
  return pino({ level: o.level ?? 'info', base: undefined, messageKey: 'msg' }, stream);
}

/** A logger that writes nothing (the library's default: an application passes its own). */
export const silentLogger = (): Logger => pino({ level: 'silent' });
