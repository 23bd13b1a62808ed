import { loadConfig } from '../../config/index.ts';
import { createRuntime } from '../../runs/index.ts';
import { runJson } from '../../server/schemas.ts';
import { isTerminal, RUN_STATUS_ORDER } from '../../runs/lifecycle/run-status.ts';
import type { RunRecord, RunStatus, Store } from '../../store/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { clip, duration, intOption, noPositionals, openDb, positional, progress, table, time } from '../common.ts';

export const runsHelp = `keel runs ls [--session ID] [--status S[,S…]] [--limit 20]   the newest runs
keel runs show <id>                                          a run: status, timing, usage, what it waits for
keel runs cancel <id> [--grace MS] [--reason TEXT] [--config FILE]   cancel a run
  All work on the local database: --db PATH (default $KEEL_DB or ./.keel/keel.db); --json for scripts.
  cancel asks the worker that holds a running run to stop (it notices within a second) and
  forces the cancel after --grace (default
  15000 ms). Enqueued messages of the session then start with the agents of --config (the same
  configuration as "keel serve" uses: ./keel.config.*, or the demo agent).`;

async function children(store: Store, run: RunRecord): Promise<string[]> {
  return (await store.runs.list({ parentRunId: run.id, limit: 10_000 })).map((r) => r.id);
}

export async function runsCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const name = `runs ${sub ?? ''}`.trim();
  const { values, positionals } = args(name, rest, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    session: { type: 'string' },
    status: { type: 'string' },
    limit: { type: 'string' },
    grace: { type: 'string' },
    config: { type: 'string' },
    reason: { type: 'string' },
  });
  switch (sub) {
    case 'ls':
    case 'list': {
      noPositionals(name, positionals);
      const limit = intOption(name, 'limit', values.limit, { min: 1, default: 20 });
      const statuses = values.status?.split(',').map((s) => s.trim());
      const bad = statuses?.find((s) => !RUN_STATUS_ORDER.includes(s as RunStatus));
      if (bad !== undefined)
        throw new UsageError(`${name}: unknown status ${JSON.stringify(bad)} (one of ${RUN_STATUS_ORDER.join(', ')})`);
      const { store } = await openDb(io, values.db);
      try {
        if (values.session && !(await store.sessions.get(values.session)))
          throw new Error(`session ${values.session} does not exist`);
        const newest: RunRecord[] = [];
        let total = 0;
        for (let after: string | undefined; ;) {
          const page = await store.runs.list({
            limit: 1000,
            ...(after ? { after } : {}),
            ...(values.session ? { sessionId: values.session } : {}),
            ...(statuses ? { statuses: statuses as RunStatus[] } : {}),
          });
          total += page.length;
          newest.push(...page);
          if (newest.length > limit) newest.splice(0, newest.length - limit);
          if (page.length < 1000) break;
          after = page.at(-1)!.id;
        }
        newest.reverse();
        if (values.json) {
          json(io, await Promise.all(newest.map(async (r) => runJson(r, await children(store, r)))));
          return 0;
        }
        if (newest.length === 0) {
          line(
            io,
            `no runs${values.session ? ` in session ${values.session}` : ''}${statuses ? ` with status ${statuses.join(' or ')}` : ''}`,
          );
          return 0;
        }
        line(
          io,
          table(
            ['ID', 'SESSION', 'STATUS', 'AGENT', 'CREATED', 'TOOK', 'COST'],
            newest.map((r) => [
              r.id,
              r.sessionId,
              statusText(r),
              `${r.agent.name}@${r.agent.version}`,
              time(r.createdAt),
              took(r),
              r.cost > 0 ? `$${r.cost.toFixed(4)}` : '-',
            ]),
          ),
        );
        if (total > newest.length) line(io, `(the newest ${newest.length} of ${total}; --limit N shows more)`);
        return 0;
      } finally {
        await store.close();
      }
    }
    case 'show': {
      const id = positional(name, positionals, 'run id, e.g. keel runs show <id> (see keel runs ls)');
      const { store } = await openDb(io, values.db);
      try {
        const run = await store.runs.get(id);
        if (!run) throw new Error(`run ${id} does not exist`);
        const j = runJson(run, await children(store, run));
        if (values.json) json(io, j);
        else showRun(io, run, j.child_run_ids);
        return 0;
      } finally {
        await store.close();
      }
    }
    case 'cancel': {
      const id = positional(name, positionals, 'run id to cancel');
      const graceMs = intOption(name, 'grace', values.grace, { default: 15_000 });
      const { store } = await openDb(io, values.db);
      try {
        const before = await store.runs.get(id);
        if (!before) throw new Error(`run ${id} does not exist`);
        if (isTerminal(before.status)) {
          if (values.json) json(io, runJson(before, await children(store, before)));
          else line(io, `run ${id} is already ${before.status}: nothing to cancel`);
          return 0;
        }
        const config = await loadConfig(values.config);
        const rt = createRuntime({
          store,
          agents: config.agents,
          compaction: config.compaction,
          ...(config.largePayloads ? { largePayloads: config.largePayloads } : {}),
        });
        const p = progress(io);
        if (before.status === 'running')
          p.update(
            `cancel requested: waiting up to ${duration(graceMs)} for the worker that holds run ${id} to stop it…`,
          );
        let run: RunRecord;
        try {
          run = await rt.runs.cancel(id, { graceMs, ...(values.reason ? { reason: values.reason } : {}) });
        } finally {
          p.done();
        }
        if (values.json) json(io, runJson(run, await children(store, run)));
        else if (run.status === 'cancelled') line(io, `cancelled run ${id} (it was ${before.status})`);
        else line(io, `run ${id} ended ${run.status} before the cancel took effect`);
        return 0;
      } finally {
        await store.close();
      }
    }
    default:
      throw new UsageError(`runs: expected ls, show or cancel\n${runsHelp}`);
  }
}

function statusText(r: RunRecord): string {
  const flags = [
    r.cancelRequested && !isTerminal(r.status) ? 'cancel requested' : '',
    r.pauseRequested && !isTerminal(r.status) ? 'pause requested' : '',
  ].filter(Boolean);
  return flags.length > 0 ? `${r.status} (${flags.join(', ')})` : r.status;
}

function took(r: RunRecord): string {
  if (r.startedAt === null) return '-';
  return duration((r.endedAt ?? Date.now()) - r.startedAt) + (r.endedAt === null ? '+' : '');
}

function showRun(io: Io, r: RunRecord, childIds: string[]): void {
  const u = r.usage as { inputTokens?: number; outputTokens?: number; cachedInputTokens?: number };
  line(io, `run ${r.id}  ${statusText(r)}`);
  line(io, `  session   ${r.sessionId}${r.turn !== null ? `  turn ${r.turn}` : ''}`);
  line(io, `  agent     ${r.agent.name}@${r.agent.version}`);
  line(io, `  created   ${time(r.createdAt)}`);
  line(io, `  started   ${time(r.startedAt)}`);
  line(io, `  ended     ${time(r.endedAt)}${r.startedAt !== null ? `  (${took(r)})` : ''}`);
  line(io, `  attempts  ${r.attempt}`);
  line(
    io,
    `  usage     ${u.inputTokens ?? 0} in (${u.cachedInputTokens ?? 0} cached), ${u.outputTokens ?? 0} out; cost $${r.cost.toFixed(4)}`,
  );
  if (r.parentRunId) line(io, `  parent    ${r.parentRunId}`);
  if (childIds.length > 0) line(io, `  children  ${childIds.join(', ')}`);
  if (r.lease) line(io, `  lease     ${r.lease.owner} until ${time(r.lease.expiresAt)}`);
  if (r.deadlineAt !== null) line(io, `  deadline  ${time(r.deadlineAt)}`);
  if (r.error)
    line(io, `  error     ${clip(String((r.error as { message?: unknown }).message ?? JSON.stringify(r.error)), 200)}`);
  const w = r.waiting as {
    kind: string;
    calls: Array<{ toolCallId: string; toolName: string; input: unknown; kind: string }>;
    decisions: Record<string, unknown>;
    expiresAt: number | null;
  } | null;
  if (w) {
    line(
      io,
      `  waiting   for ${w.kind === 'approval' ? 'approval' : 'an answer'}${w.expiresAt !== null ? ` until ${time(w.expiresAt)}` : ''}:`,
    );
    for (const c of w.calls) {
      line(
        io,
        `    ${c.toolCallId}  ${c.kind === 'approval' ? 'approve' : 'answer'} ${c.toolName}(${clip(JSON.stringify(c.input), 100)})${w.decisions[c.toolCallId] !== undefined ? '  [decided]' : ''}`,
      );
    }
  }
}
