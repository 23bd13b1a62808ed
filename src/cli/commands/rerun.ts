import { loadConfig } from '../../config/index.ts';
import type { RerunRequest } from '../../runs/index.ts';
import { evalRuntime } from './datasets.ts';
import { runJson } from '../../server/schemas.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { intOption, openDb, positional, progress } from '../common.ts';

export const rerunHelp = `keel rerun <run> [--from N] [--agent name@version] [--tools reuse|execute] [--wait]
  Reruns a run from one of its steps in a new session forked there (the original is untouched),
  on another agent version (--agent; default the run's own), its tools by policy: by default
  read-only tools run again and every other tool gets the result the run recorded for the same
  call (an effectful call with no recorded result fails the rerun); --tools reuse|execute sets
  every tool. --message TEXT replaces the message that started the run (from its first step).
  --wait runs it here until it ends or waits for a person, then prints it; without it, a worker
  (keel serve, keel worker) runs it. keel compare <run> <rerun> shows the difference.
  --json prints the new run as GET /v1/runs/{id} does. --db PATH (default $KEEL_DB or
  ./.keel/keel.db), --config FILE.`;

export async function rerunCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = args('rerun', argv, {
    from: { type: 'string' },
    agent: { type: 'string' },
    tools: { type: 'string' },
    message: { type: 'string' },
    wait: { type: 'boolean' },
    json: { type: 'boolean' },
    db: { type: 'string' },
    config: { type: 'string' },
  });
  const source = positional('rerun', positionals, 'run id to rerun');
  if (values.tools !== undefined && values.tools !== 'reuse' && values.tools !== 'execute')
    throw new UsageError(`rerun: --tools is reuse or execute, not ${JSON.stringify(values.tools)}`);
  const request: RerunRequest = {
    ...(values.from !== undefined ? { from: intOption('rerun', 'from', values.from, { min: 1, default: 1 }) } : {}),
    ...(values.agent !== undefined ? { agent: values.agent } : {}),
    ...(values.tools !== undefined ? { tools: values.tools } : {}),
    ...(values.message !== undefined ? { message: values.message } : {}),
  };
  const config = await loadConfig(values.config);
  const { store } = await openDb(io, values.db);
  const rt = evalRuntime(store, config);
  try {
    let run = await rt.runs.rerun(source, request);
    if (values.wait) {
      const p = progress(io);
      p.update(`running rerun ${run.id}…`);
      rt.startWorker({ concurrency: 1, pollMs: 50 });
      try {
        run = await rt.runs.wait(run.id, { until: 'settled' });
      } finally {
        p.done();
      }
    }
    if (values.json) json(io, runJson(run, []));
    else {
      const l = run.options.rerun as { of: { step: number }; agent: { name: string; version: string } };
      line(
        io,
        `rerun ${run.id} of run ${source} from step ${l.of.step} on ${l.agent.name}@${l.agent.version} (session ${run.sessionId}): ${run.status}`,
      );
      if (run.error) line(io, `  ${String((run.error as { message?: unknown }).message ?? JSON.stringify(run.error))}`);
      line(io, `  keel compare ${source} ${run.id}`);
    }
    return run.status === 'failed' || run.status === 'timed_out' ? 1 : 0;
  } finally {
    await rt.close({ graceMs: 0 });
    await store.close();
  }
}
