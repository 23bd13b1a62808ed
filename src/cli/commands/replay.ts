import { Sessions, type ReplayReport } from '../../session/index.ts';
import { args, json, line, type Io } from '../args.ts';
import { openDb, positional, progress } from '../common.ts';

export const replayHelp = `keel replay <session> --verify   check that the log explains every recorded model request
  Rebuilds each request from the log alone (branch path, compaction) and compares it with its
  header: context ids and fingerprint. Exit code 1 and a report when any request does not match.
  --db PATH (default $KEEL_DB or ./.keel/keel.db); --json for the report as JSON.`;

export async function replayCommand(argv: string[], io: Io): Promise<number> {
  // --verify is the only mode (and the default): accepted so scripts can say what they mean.
  const { values, positionals } = args('replay', argv, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    verify: { type: 'boolean' },
  });
  const id = positional('replay', positionals, 'session id, e.g. keel replay <session> --verify');
  const { store } = await openDb(io, values.db);
  let report: ReplayReport;
  try {
    const sessions = new Sessions({ store });
    const session = await sessions.get(id);
    const p = progress(io);
    try {
      report = await sessions.verifyReplay(id, {
        onProgress: (n) => p.update(`replaying ${id}: ${n} of ${session.lastSeq} events…`),
      });
    } finally {
      p.done();
    }
  } finally {
    await store.close();
  }
  if (values.json) json(io, report);
  else line(io, replayText(report));
  return report.ok ? 0 : 1;
}

export function replayText(r: ReplayReport): string {
  const head = `${r.events} events, ${r.requests} model request${r.requests === 1 ? '' : 's'}`;
  if (r.ok) return `replay ok: ${head}; the log explains every request`;
  const lines = [
    `replay FAILED: ${r.mismatches.length} of ${r.requests} request${r.requests === 1 ? '' : 's'} do not match the log (${head})`,
  ];
  for (const m of r.mismatches) lines.push(`  #${m.seq} (message ${m.messageId}) ${m.kind}: ${m.detail}`);
  return lines.join('\n');
}
