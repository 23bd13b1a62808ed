import { eventJson } from '../../server/schemas.ts';
import { Sessions, type SessionEvent } from '../../session/index.ts';
import { args, line, type Io } from '../args.ts';
import { clip, intOption, jsonl, openDb, positional, time } from '../common.ts';

export const eventsHelp = `keel events <session> [--after SEQ] [--follow] [--type PREFIX]   a session's event log
  One event a line (--json: one JSON event a line, as the API's event envelope). --follow keeps
  polling the database for new events (every --interval ms, default 500) until Ctrl-C.
  --db PATH (default $KEEL_DB or ./.keel/keel.db).`;

export async function eventsCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = args('events', argv, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    after: { type: 'string' },
    follow: { type: 'boolean', short: 'f' },
    type: { type: 'string' },
    interval: { type: 'string' },
  });
  const id = positional('events', positionals, 'session id, e.g. keel events <session> (see keel sessions ls)');
  let after = intOption('events', 'after', values.after, { default: 0 });
  const intervalMs = intOption('events', 'interval', values.interval, { min: 10, default: 500 });
  const { store } = await openDb(io, values.db);
  try {
    const sessions = new Sessions({ store });
    await sessions.get(id); // a clear error for an unknown session
    const show = (e: SessionEvent) => {
      if (values.type && !e.type.startsWith(values.type)) return;
      if (values.json) jsonl(io, eventJson(e));
      else line(io, eventLine(e));
    };
    const drain = async () => {
      for (;;) {
        const page = await sessions.events(id, { after, limit: 1000 });
        for (const e of page) show(e);
        if (page.length > 0) after = page.at(-1)!.seq;
        if (page.length < 1000) return;
      }
    };
    await drain();
    if (!values.follow) return 0;
    while (!io.signal.aborted) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, intervalMs);
        function done() {
          clearTimeout(t);
          io.signal.removeEventListener('abort', done);
          resolve();
        }
        io.signal.addEventListener('abort', done, { once: true });
      });
      if (!io.signal.aborted) await drain();
    }
    return 0;
  } finally {
    await store.close();
  }
}

const text = (parts: ReadonlyArray<{ type: string; text?: string }>) =>
  parts.map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');

/** What an event says, in a few words. */
export function eventSummary(e: SessionEvent): string {
  switch (e.type) {
    case 'session/created':
      return e.data.title ? JSON.stringify(e.data.title) : '';
    case 'user/message':
      return `${e.data.via === 'steer' ? '(steer) ' : ''}${clip(text(e.data.message.content), 100)}`;
    case 'assistant/message': {
      const calls = e.data.message.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolName] : []));
      const t = clip(text(e.data.message.content), 100);
      return `${t ? JSON.stringify(t) : ''}${calls.length > 0 ? `${t ? ' ' : ''}calls ${calls.join(', ')}` : ''}${e.data.message.interrupted ? ' [interrupted]' : ''} (${e.data.finishReason}, ${e.data.usage.inputTokens} in / ${e.data.usage.outputTokens} out)`;
    }
    case 'turn/start':
      return `${e.data.agent.name}@${e.data.agent.version} on ${e.data.model.provider}:${e.data.model.modelId}${e.data.resumed ? ' (resumed)' : ''}`;
    case 'request/header':
      return `${e.data.provider}:${e.data.modelId} attempt ${e.data.attempt}, ${e.data.context.messages} context messages`;
    case 'tool/call':
    case 'tool/approval':
    case 'user/question':
      return `${e.data.toolName}(${clip(JSON.stringify(e.data.input), 80)})`;
    case 'tool/decision':
      return `${e.data.approved ? 'approved' : 'denied'}${e.data.reason ? `: ${e.data.reason}` : ''}`;
    case 'user/answer':
      return clip(JSON.stringify(e.data.answer), 100);
    case 'tool/result': {
      const o = e.data.output;
      return `${e.data.toolName} ${o.type === 'error' ? `error ${o.code}: ${clip(o.message, 80)}` : `-> ${clip(o.type === 'text' ? o.value : JSON.stringify(o.value), 80)}`}`;
    }
    case 'step/end':
      return e.data.reason;
    case 'turn/end':
      return `${e.data.reason} after ${e.data.steps} step${e.data.steps === 1 ? '' : 's'}${e.data.error ? `: ${clip(e.data.error.message, 80)}` : ''}`;
    case 'run/status':
      return `${e.data.from ?? '-'} -> ${e.data.to}${e.data.reason ? ` (${clip(e.data.reason, 80)})` : ''}`;
    case 'run/interrupted':
      return `${e.data.reason}, attempt ${e.data.attempt}, resumes after step ${e.data.step}`;
    case 'model/retry':
      return `attempt ${e.data.attempt} failed (${clip(e.data.error.message, 60)}), retry in ${e.data.delayMs} ms`;
    case 'model/error':
      return `${e.data.error.kind}: ${clip(e.data.error.message, 80)}`;
    case 'compaction':
      return `${e.data.reason}: ${e.data.tokensBefore} -> ${e.data.tokensAfter} tokens`;
    case 'leaf/move':
      return `${e.data.reason} to ${e.data.entryId ?? '(root)'}`;
    default:
      return clip(JSON.stringify(e.data), 100).replace(/^\{\}$/, '');
  }
}

/** `#12  2025-01-02 10:11:12  tool/call  run …a1b2 t1 s2  get_weather({"city":"paris"})` */
export function eventLine(e: SessionEvent): string {
  const where = [
    e.runId ? `run …${e.runId.slice(-6)}` : '',
    e.turn !== undefined ? `t${e.turn}` : '',
    e.step !== undefined ? `s${e.step}` : '',
  ]
    .filter(Boolean)
    .join(' ');
  return `#${String(e.seq).padEnd(5)} ${time(e.time)}  ${e.type.padEnd(17)} ${where.padEnd(18)} ${eventSummary(e)}`.trimEnd();
}
