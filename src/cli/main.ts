#!/usr/bin/env node
import { UsageError, type Io } from './args.ts';
import { chatCommand, chatHelp } from './commands/chat.ts';
import { compareCommand, compareHelp } from './commands/compare.ts';
import { eventsCommand, eventsHelp } from './commands/events.ts';
import { keysCommand, keysHelp } from './commands/keys.ts';
import { replayCommand, replayHelp } from './commands/replay.ts';
import { rerunCommand, rerunHelp } from './commands/rerun.ts';
import { retentionCommand, retentionHelp } from './commands/retention.ts';
import { datasetsCommand, datasetsHelp } from './commands/datasets.ts';
import { eraseCommand, eraseHelp } from './commands/erase.ts';
import { evalCommand, evalHelp } from './commands/eval.ts';
import { runsCommand, runsHelp } from './commands/runs.ts';
import { schedulesCommand, schedulesHelp } from './commands/schedules.ts';
import { serveCommand, serveHelp } from './commands/serve.ts';
import { sessionsCommand, sessionsHelp } from './commands/sessions.ts';
import { tenantsCommand, tenantsHelp } from './commands/tenants.ts';
import { usageCommand, usageHelp } from './commands/usage.ts';
import { webhooksCommand, webhooksHelp } from './commands/webhooks.ts';
import { workerCommand, workerHelp } from './commands/worker.ts';
import { runDemo } from './demo.ts';
import { version } from './version.ts';

type Command = { run: (argv: string[], io: Io) => Promise<number>; help: string };

export const commands: Record<string, Command> = {
  serve: { run: serveCommand, help: serveHelp },
  worker: { run: workerCommand, help: workerHelp },
  chat: { run: chatCommand, help: chatHelp },
  sessions: { run: sessionsCommand, help: sessionsHelp },
  erase: { run: eraseCommand, help: eraseHelp },
  runs: { run: runsCommand, help: runsHelp },
  schedules: { run: schedulesCommand, help: schedulesHelp },
  retention: { run: retentionCommand, help: retentionHelp },
  webhooks: { run: webhooksCommand, help: webhooksHelp },
  events: { run: eventsCommand, help: eventsHelp },
  replay: { run: replayCommand, help: replayHelp },
  rerun: { run: rerunCommand, help: rerunHelp },
  compare: { run: compareCommand, help: compareHelp },
  datasets: { run: datasetsCommand, help: datasetsHelp },
  eval: { run: evalCommand, help: evalHelp },
  keys: { run: keysCommand, help: keysHelp },
  tenants: { run: tenantsCommand, help: tenantsHelp },
  usage: { run: usageCommand, help: usageHelp },
  demo: {
    run: async (_argv, io) => runDemo(io.out),
    help: 'keel demo\n  One turn of the step/turn loop in the terminal, on a scripted model.',
  },
};

const HELP = () => `keel ${version} - a durable agent runtime

Commands:
${Object.values(commands)
  .map((c) => c.help.split('\n')[0])
  .join('\n')}

keel <command> --help for details. Model keys come from the providers' usual environment variables.`;

export async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...rest] = argv;
  try {
    if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
      io.out.write(`${HELP()}\n`);
      return 0;
    }
    if (name === '--version' || name === '-v') {
      io.out.write(`${version}\n`);
      return 0;
    }
    const command = commands[name];
    if (!command) throw new UsageError(`unknown command '${name}'\n\n${HELP()}`);
    if (rest.includes('--help') || rest.includes('-h')) {
      io.out.write(`${command.help}\n`);
      return 0;
    }
    return await command.run(rest, io);
  } catch (e) {
    io.err.write(`keel: ${(e as Error).message}\n`);
    return e instanceof UsageError ? 2 : 1;
  }
}

/** The process entry point: real stdio, and SIGINT/SIGTERM as the stop signal. */
export async function cli(): Promise<void> {
  const stop = new AbortController();
  let interrupts = 0;
  const onSignal = () => {
    // A second Ctrl-C does not wait for the graceful shutdown.
    if (++interrupts > 1) process.exit(130);
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // The reader of our output went away (`keel compare A B | head`): stop quietly, as other tools do.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
  process.exitCode = await main(process.argv.slice(2), {
    out: process.stdout,
    err: process.stderr,
    in: process.stdin,
    env: process.env,
    signal: stop.signal,
  });
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}

if (import.meta.url === `file://${process.argv[1]}`) await cli();
