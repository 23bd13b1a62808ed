import { loadConfig } from '../../config/index.ts';
import { createRuntime, type CreateScheduleInput, type Runtime } from '../../runs/index.ts';
import { fireJson, scheduleJson } from '../../server/routes/schedules.ts';
import type { ScheduleCatchUp, ScheduleOverlap, ScheduleRecord, Store } from '../../store/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { clip, intOption, noPositionals, openDb, positional, table, time } from '../common.ts';

export const schedulesHelp = `keel schedules ls [--tenant T] [--limit 50]          the schedules: when each fires next, its target
keel schedules create (--cron EXPR [--tz ZONE] | --every SECONDS) --message TEXT
                      (--session ID | --new-session [--title T]) [--agent NAME[@VERSION]]
                      [--overlap skip|enqueue|interrupt] [--catch-up once|skip] [--name N]
                      [--tenant T] [--config FILE]                  create a schedule
keel schedules pause|resume|delete <id>                     pause (no tick fires), resume from now, delete
keel schedules fires <id> [--limit 20]                      the history: each tick, its outcome, its run
  A schedule sends its message at each tick of a cron expression in an IANA time zone (default
  UTC), or every SECONDS (at least 1), to one session or to a new session per fire. --overlap: what
  a tick does while the session's previous run is active (default skip). --catch-up: after
  downtime the latest missed tick fires once, or none does (default once). Workers (keel worker,
  keel serve) fire them. All work on the local database: --db PATH (default $KEEL_DB or
  ./.keel/keel.db); --json for scripts; --config names the agents (as keel serve loads them).`;

const OVERLAPS: readonly ScheduleOverlap[] = ['skip', 'enqueue', 'interrupt'];
const CATCH_UPS: readonly ScheduleCatchUp[] = ['once', 'skip'];

function when(s: ScheduleRecord): string {
  return s.cron ? `cron "${s.cron.expression}" ${s.cron.timezone}` : `every ${s.intervalSeconds} s`;
}

function target(s: ScheduleRecord): string {
  return 'sessionId' in s.target ? `session ${s.target.sessionId}` : 'a new session per fire';
}

async function runtimeFor(store: Store, config: string | undefined): Promise<Runtime> {
  const c = await loadConfig(config);
  return createRuntime({
    store,
    agents: c.agents,
    compaction: c.compaction,
    ...(c.largePayloads ? { largePayloads: c.largePayloads } : {}),
  });
}

export async function schedulesCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const name = `schedules ${sub ?? ''}`.trim();
  const { values, positionals } = args(name, rest, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    config: { type: 'string' },
    tenant: { type: 'string' },
    limit: { type: 'string' },
    cron: { type: 'string' },
    tz: { type: 'string' },
    every: { type: 'string' },
    message: { type: 'string' },
    session: { type: 'string' },
    'new-session': { type: 'boolean' },
    title: { type: 'string' },
    agent: { type: 'string' },
    overlap: { type: 'string' },
    'catch-up': { type: 'string' },
    name: { type: 'string' },
  });
  switch (sub) {
    case 'ls':
    case 'list': {
      noPositionals(name, positionals);
      const limit = intOption(name, 'limit', values.limit, { min: 1, default: 50 });
      const { store } = await openDb(io, values.db);
      try {
        const list = await store.schedules.list({ limit, ...(values.tenant ? { tenant: values.tenant } : {}) });
        if (values.json) {
          json(
            io,
            list.map((s) => ({ tenant: s.tenant, ...scheduleJson(s) })),
          );
          return 0;
        }
        if (list.length === 0) {
          line(io, 'no schedules');
          return 0;
        }
        line(
          io,
          table(
            ['ID', 'NAME', 'WHEN', 'TARGET', 'OVERLAP', 'NEXT', 'TENANT'],
            list.map((s) => [
              s.id,
              clip(s.name ?? '-', 30),
              when(s),
              target(s),
              s.overlap,
              s.pausedAt !== null ? 'paused' : time(s.nextFireAt),
              s.tenant,
            ]),
          ),
        );
        return 0;
      } finally {
        await store.close();
      }
    }
    case 'create': {
      noPositionals(name, positionals);
      if ((values.cron === undefined) === (values.every === undefined))
        throw new UsageError(`${name}: give one of --cron EXPR and --every SECONDS\n${schedulesHelp}`);
      if (values.message === undefined) throw new UsageError(`${name}: --message TEXT is required`);
      if ((values.session === undefined) === (values['new-session'] !== true))
        throw new UsageError(`${name}: give one of --session ID and --new-session`);
      if (values.overlap !== undefined && !OVERLAPS.includes(values.overlap as ScheduleOverlap))
        throw new UsageError(`${name}: --overlap is one of ${OVERLAPS.join(', ')}`);
      if (values['catch-up'] !== undefined && !CATCH_UPS.includes(values['catch-up'] as ScheduleCatchUp))
        throw new UsageError(`${name}: --catch-up is one of ${CATCH_UPS.join(', ')}`);
      const every =
        values.every !== undefined ? intOption(name, 'every', values.every, { min: 1, default: 0 }) : undefined;
      const { store } = await openDb(io, values.db);
      try {
        const rt = await runtimeFor(store, values.config);
        const input: CreateScheduleInput = {
          message: values.message,
          target:
            values.session !== undefined
              ? { sessionId: values.session }
              : { newSession: values.title !== undefined ? { title: values.title } : {} },
          ...(values.cron !== undefined ? { cron: { expression: values.cron, timezone: values.tz ?? 'UTC' } } : {}),
          ...(every !== undefined ? { interval: { seconds: every } } : {}),
          ...(values.tenant !== undefined ? { tenant: values.tenant } : {}),
          ...(values.name !== undefined ? { name: values.name } : {}),
          ...(values.agent !== undefined ? { agent: values.agent } : {}),
          ...(values.overlap !== undefined ? { overlap: values.overlap as ScheduleOverlap } : {}),
          ...(values['catch-up'] !== undefined ? { catchUp: values['catch-up'] as ScheduleCatchUp } : {}),
        };
        const s = await rt.schedules.create(input);
        if (values.json) json(io, { tenant: s.tenant, ...scheduleJson(s) });
        else line(io, `created schedule ${s.id}: ${when(s)}, to ${target(s)}; next fire ${time(s.nextFireAt)} UTC`);
        return 0;
      } finally {
        await store.close();
      }
    }
    case 'pause':
    case 'resume':
    case 'delete': {
      const id = positional(name, positionals, `schedule id to ${sub} (see keel schedules ls)`);
      const { store } = await openDb(io, values.db);
      try {
        const rt = await runtimeFor(store, values.config);
        if (sub === 'delete') {
          await rt.schedules.delete(id);
          if (values.json) json(io, { id, deleted: true });
          else line(io, `deleted schedule ${id}`);
          return 0;
        }
        const s = await rt.schedules[sub](id);
        if (values.json) json(io, { tenant: s.tenant, ...scheduleJson(s) });
        else
          line(
            io,
            sub === 'pause' ? `paused schedule ${id}` : `resumed schedule ${id}; next fire ${time(s.nextFireAt)} UTC`,
          );
        return 0;
      } finally {
        await store.close();
      }
    }
    case 'fires': {
      const id = positional(name, positionals, 'schedule id, e.g. keel schedules fires <id>');
      const limit = intOption(name, 'limit', values.limit, { min: 1, default: 20 });
      const { store } = await openDb(io, values.db);
      try {
        if (!(await store.schedules.get(id))) throw new Error(`schedule ${id} does not exist`);
        const fires = await store.schedules.listFires(id, { limit });
        if (values.json) {
          json(io, fires.map(fireJson));
          return 0;
        }
        if (fires.length === 0) {
          line(io, `schedule ${id} has not fired yet`);
          return 0;
        }
        line(
          io,
          table(
            ['TICK', 'FIRED', 'OUTCOME', 'RUN', 'SESSION', 'REASON'],
            fires.map((f) => [
              time(f.tick),
              time(f.firedAt),
              f.outcome,
              f.runId ?? '-',
              f.sessionId ?? '-',
              clip(f.reason ?? '', 60),
            ]),
          ),
        );
        return 0;
      } finally {
        await store.close();
      }
    }
    default:
      throw new UsageError(`schedules: expected ls, create, pause, resume, delete or fires\n${schedulesHelp}`);
  }
}
