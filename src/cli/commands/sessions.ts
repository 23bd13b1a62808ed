import { createReadStream, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { sessionJson } from '../../server/schemas.ts';
import { loadConfig } from '../../config/index.ts';
import { isTerminal } from '../../runs/index.ts';
import { Sessions, type TranscriptItem } from '../../session/index.ts';
import type { SessionRecord, Store } from '../../store/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { clip, intOption, noPositionals, openDb, positional, progress, table, time } from '../common.ts';
import { configuredRuntime } from '../configured-runtime.ts';

export const sessionsHelp = `keel sessions ls [--limit 20] [--all] [--tenant T]    the newest sessions (--all: archived ones too)
keel sessions show <id>                              a session and its transcript
keel sessions export <id> [--out FILE]               the session as JSONL (stdout, or FILE)
keel sessions import <FILE|->                        import an export (- reads stdin) [--tenant T] [--keep-ids]
    under new ids (its origin: the session it came from) unless --keep-ids (refused if they exist)
keel sessions erase <id> | --tenant T --all [--config FILE]
    erase a session (or every session of a tenant): its runs are cancelled, its log, content and
    run payloads removed; a tombstone with its totals remains. It cannot be undone.
  All work on the local database: --db PATH (default $KEEL_DB or ./.keel/keel.db); --json for scripts.`;

const withTenant = (s: SessionRecord) => ({ ...sessionJson(s), tenant: s.tenant });

export async function sessionsCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const name = `sessions ${sub ?? ''}`.trim();
  const { values, positionals } = args(name, rest, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    limit: { type: 'string' },
    all: { type: 'boolean' },
    tenant: { type: 'string' },
    'keep-ids': { type: 'boolean' },
    config: { type: 'string' },
    out: { type: 'string', short: 'o' },
  });
  switch (sub) {
    case 'ls':
    case 'list': {
      noPositionals(name, positionals);
      const limit = intOption(name, 'limit', values.limit, { min: 1, default: 20 });
      return withStore(io, values.db, false, async (store) => {
        // Pages come oldest first: keep the newest `limit`.
        const newest: SessionRecord[] = [];
        let total = 0;
        for (let after: string | undefined; ;) {
          const page = await store.sessions.list({
            limit: 1000,
            includeArchived: values.all ?? false,
            ...(after ? { after } : {}),
            ...(values.tenant ? { tenant: values.tenant } : {}),
          });
          total += page.length;
          newest.push(...page);
          if (newest.length > limit) newest.splice(0, newest.length - limit);
          if (page.length < 1000) break;
          after = page.at(-1)!.id;
        }
        newest.reverse();
        if (values.json) return void json(io, newest.map(withTenant));
        if (newest.length === 0)
          return void line(io, `no sessions${values.all ? '' : ' (--all shows archived ones too)'}`);
        line(
          io,
          table(
            ['ID', 'CREATED', 'EVENTS', 'AGENT', 'TENANT', 'TITLE'],
            newest.map((s) => [
              s.id,
              time(s.createdAt),
              String(s.lastSeq),
              s.agent ?? '-',
              s.tenant,
              `${clip(s.title ?? '', 50)}${s.archivedAt !== null ? ' (archived)' : ''}`,
            ]),
          ),
        );
        if (total > newest.length) line(io, `(the newest ${newest.length} of ${total}; --limit N shows more)`);
      });
    }
    case 'show': {
      const id = positional(name, positionals, 'session id, e.g. keel sessions show <id> (see keel sessions ls)');
      return withStore(io, values.db, false, async (store) => {
        const sessions = new Sessions({ store });
        const s = await sessions.get(id);
        const transcript = await sessions.transcript(id);
        const runs = await allRuns(store, id);
        if (values.json) {
          json(io, {
            session: withTenant(s),
            transcript,
            runs: runs.map((r) => ({ id: r.id, status: r.status, created_at: time(r.createdAt) })),
          });
          return;
        }
        line(io, `session ${s.id}${s.title ? `  ${JSON.stringify(s.title)}` : ''}`);
        line(
          io,
          `  created ${time(s.createdAt)}  tenant ${s.tenant}  agent ${s.agent ?? '(default)'}  events ${s.lastSeq}`,
        );
        if (s.origin) line(io, `  forked from session ${s.origin.sessionId} at entry ${s.origin.entryId}`);
        if (s.archivedAt !== null) line(io, `  archived ${time(s.archivedAt)}`);
        if (Object.keys(s.metadata).length > 0) line(io, `  metadata ${clip(JSON.stringify(s.metadata), 100)}`);
        const active = runs.filter((r) => !isTerminal(r.status));
        if (runs.length > 0) {
          line(
            io,
            `  runs ${runs.length}, last ${runs.at(-1)!.status}${active.length > 0 ? `; active: ${active.map((r) => `${r.id} (${r.status})`).join(', ')}` : ''}`,
          );
        }
        line(io);
        if (transcript.length === 0) line(io, '(no messages yet)');
        for (const item of transcript) line(io, transcriptLine(item));
      });
    }
    case 'export': {
      const id = positional(name, positionals, 'session id to export');
      return withStore(io, values.db, false, async (store) => {
        const sessions = new Sessions({ store });
        const s = await sessions.get(id);
        const out = values.out ? createWriteStream(values.out) : io.out;
        let lines = 0;
        try {
          if (values.out) await once(out, 'open');
          for await (const l of sessions.export(id)) {
            lines++;
            if (!out.write(`${l}\n`)) await once(out, 'drain');
          }
        } finally {
          if (values.out)
            await new Promise<void>((resolve, reject) =>
              (out as ReturnType<typeof createWriteStream>).end((e?: Error | null) => (e ? reject(e) : resolve())),
            );
        }
        if (values.out) {
          if (values.json) json(io, { session_id: s.id, file: values.out, lines, events: s.lastSeq });
          else line(io, `exported session ${s.id} (${s.lastSeq} events, ${lines} lines) to ${values.out}`);
        }
      });
    }
    case 'import': {
      const file = positional(name, positionals, 'export to import: a FILE, or - for stdin');
      const stdin = io.in ?? process.stdin;
      if (file === '-' && stdin.isTTY)
        throw new UsageError(
          'sessions import: stdin is a terminal: pipe an export in, e.g. keel sessions import - < session.jsonl',
        );
      const input = file === '-' ? stdin : createReadStream(file);
      if (file !== '-')
        await once(input, 'open').catch((e: NodeJS.ErrnoException) =>
          Promise.reject(new Error(`cannot read ${file}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`)),
        );
      return withStore(io, values.db, true, async (store) => {
        const p = progress(io);
        let s: SessionRecord;
        try {
          s = await new Sessions({ store }).import(input as AsyncIterable<Uint8Array>, {
            onProgress: (n) => p.update(`importing ${file === '-' ? 'stdin' : file}: ${n} lines read…`),
            ...(values.tenant ? { tenant: values.tenant } : {}),
            ids: values['keep-ids'] ? 'keep' : 'new',
          });
        } finally {
          p.done();
        }
        if (values.json) json(io, withTenant(s));
        else
          line(
            io,
            `imported session ${s.id} (${s.lastSeq} events${s.title ? `, ${JSON.stringify(s.title)}` : ''}) for tenant ${s.tenant}`,
          );
      });
    }
    case 'erase': {
      const tenant = values.tenant;
      if (values.all !== true && positionals.length === 0)
        throw new UsageError(`sessions erase: name a session, or --tenant T --all\n${sessionsHelp}`);
      if (values.all === true && (tenant === undefined || positionals.length > 0))
        throw new UsageError(
          'sessions erase --all erases every session of one tenant: give --tenant T and no session id',
        );
      const id = values.all === true ? undefined : positional(name, positionals, 'session id to erase');
      return withStore(io, values.db, false, async (store) => {
        const config = await loadConfig(values.config);
        const rt = configuredRuntime(store, config);
        try {
          if (id !== undefined) {
            await rt.erasure.eraseSession(id);
            const tomb = (await rt.sessions.find(id))!;
            if (values.json) json(io, withTenant(tomb));
            else
              line(
                io,
                `erased session ${id} (tenant ${tomb.tenant}; ${tomb.erasedTotals?.runs ?? 0} runs, cost ${tomb.erasedTotals?.cost ?? 0} kept for billing)`,
              );
          } else {
            const erased = (await rt.erasure.eraseTenantSessions(tenant!)).sessionIds.length;
            if (values.json) json(io, { tenant, erased });
            else line(io, `erased ${erased} sessions of tenant ${tenant}`);
          }
        } finally {
          await rt.close({ graceMs: 0 });
        }
      });
    }
    default:
      throw new UsageError(`sessions: expected ls, show, export, import or erase\n${sessionsHelp}`);
  }
}

async function withStore(
  io: Io,
  db: string | undefined,
  create: boolean,
  fn: (store: Store) => Promise<void>,
): Promise<number> {
  const { store } = await openDb(io, db, { create });
  try {
    await fn(store);
    return 0;
  } finally {
    await store.close();
  }
}

async function allRuns(store: Store, sessionId: string) {
  const runs = [];
  for (let after: string | undefined; ;) {
    const page = await store.runs.list({ sessionId, limit: 1000, ...(after ? { after } : {}) });
    runs.push(...page);
    if (page.length < 1000) return runs;
    after = page.at(-1)!.id;
  }
}

/** One transcript item as a line (or a few) for people. */
export function transcriptLine(item: TranscriptItem): string {
  const at = time(item.time);
  switch (item.kind) {
    case 'user':
      return `${at}  user: ${item.text}${item.files > 0 ? ` [${item.files} file${item.files === 1 ? '' : 's'}]` : ''}`;
    case 'assistant': {
      const tools = item.tools.map(
        (t) =>
          `${t.toolName} ${t.status === 'ok' ? 'ok' : t.status === 'error' ? `failed (${t.error ?? 'error'})` : 'pending'}`,
      );
      const text = item.text || (tools.length > 0 ? '' : '(no text)');
      return `${at}  assistant: ${text}${item.interrupted ? ' [interrupted]' : ''}${tools.length > 0 ? `${text ? '  ' : ''}[tools: ${tools.join(', ')}]` : ''}`;
    }
    case 'compaction':
      return `${at}  -- context compacted (${item.tokensBefore} -> ${item.tokensAfter} tokens): ${clip(item.summary, 100)}`;
    case 'branch':
      return `${at}  -- branch summary: ${clip(item.summary, 100)}`;
  }
}
