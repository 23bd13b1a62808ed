#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runDemo } from './demo.ts';

const HELP = `keel - a durable agent runtime

Usage:
  keel demo        run a short demo turn on the scripted model
  keel --version   print the version
  keel --help      show this help

The server (keel serve), the chat client (keel chat) and the session commands
are not built yet: see docs/architecture.md for the plan.`;

export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, allowPositionals: true, options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } } });
  } catch (e) {
    process.stderr.write(`keel: ${(e as Error).message}\n\n${HELP}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  if (parsed.values.version) {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  const [command = 'demo'] = parsed.positionals;
  switch (command) {
    case 'demo':
      return runDemo();
    case 'serve':
    case 'chat':
    case 'worker':
      process.stderr.write(`keel: '${command}' is not implemented yet in this version\n`);
      return 2;
    default:
      process.stderr.write(`keel: unknown command '${command}'\n\n${HELP}\n`);
      return 2;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main(process.argv.slice(2));
}
