import { randomUUID } from 'node:crypto';
import {
  SETTLED_STATUSES,
  TERMINAL_STATUSES,
  WAITING_FOR_PEOPLE,
  type RunStatus,
} from '../../runs/lifecycle/run-status.ts';
import { KeelNetworkError, KeelProblem, type KeelClient, type Run, type Session } from '../../client/index.ts';
import { args, UsageError, type Io } from '../args.ts';
import { LineInput, type Read } from '../chat/input.ts';
import {
  approvalPrompt,
  ChatRenderer,
  clipOneLine,
  isYes,
  parseAnswer,
  questionPrompt,
  questionsOf,
} from '../chat/render.ts';
import { SessionStream } from '../chat/stream.ts';
import { eventPosition, formatPosition } from '../../session/feed-position.ts';
import { NEEDS_KEY, serverClient } from '../server-client.ts';

export const chatHelp = `keel chat [session] [--url http://127.0.0.1:8787] [--key KEY] [--agent NAME] [--reasoning]
  An interactive client of a running server ("keel serve"): creates a session unless one is
  given, sends each line as a message and streams the reply. Asks before tools that need
  approval, and asks the agent's questions. Ctrl-C cancels a running reply (the session stays);
  Ctrl-C twice at an empty prompt, Ctrl-D or /exit quits. Reconnects by itself if the server
  restarts. --url defaults to $KEEL_URL, --key to $KEEL_API_KEY; --reasoning shows the model's
  visible reasoning. Lines piped into stdin are sent (and answer prompts) one after another.`;

const TERMINAL: ReadonlySet<string> = new Set(TERMINAL_STATUSES);
const SETTLED: ReadonlySet<string> = new Set(SETTLED_STATUSES);

export async function chatCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = args('chat', argv, {
    url: { type: 'string' },
    key: { type: 'string' },
    agent: { type: 'string' },
    reasoning: { type: 'boolean' },
  });
  if (positionals.length > 1) throw new UsageError(`chat: unexpected argument ${JSON.stringify(positionals[1])}`);
  const client = serverClient('chat', io, values.url, values.key);
  let session: Session;
  try {
    session = positionals[0]
      ? await client.sessions.get(positionals[0])
      : await client.sessions.create(values.agent ? { agent: values.agent } : {});
  } catch (e) {
    throw startError(e, positionals[0]);
  }
  const chat = new Chat(client, session, io, {
    resumed: positionals[0] !== undefined,
    reasoning: values.reasoning ?? false,
    ...(values.agent ? { agent: values.agent } : {}),
  });
  return chat.run();
}

function startError(e: unknown, sessionId: string | undefined): Error {
  if (e instanceof KeelNetworkError)
    return new Error(`${e.message}\n  start a server with "keel serve", or point --url (or $KEEL_URL) at one`);
  if (e instanceof KeelProblem && e.status === 401) return new Error(NEEDS_KEY);
  if (e instanceof KeelProblem && e.status === 404 && sessionId)
    return new Error(`no session ${sessionId} on this server (or it belongs to another API key's tenant)`);
  return e instanceof Error ? e : new Error(String(e));
}

type Outcome = 'answered' | 'interrupt' | 'eof' | 'gone';

/** One chat: the prompt loop, the session stream and the run being driven. */
class Chat {
  private readonly client: KeelClient;
  private readonly session: Session;
  private readonly io: Io;
  private readonly o: { resumed: boolean; reasoning: boolean; agent?: string };
  private readonly color: boolean;
  private readonly renderer: ChatRenderer;
  private readonly input: LineInput;
  private stream: SessionStream | undefined;
  /** The latest status of each run, with the seq of its event (how new it is). */
  private readonly statuses = new Map<string, { status: string; seq: number }>();
  private wakers: Array<() => void> = [];
  private current: string | undefined;
  /** A message is being sent: a Ctrl-C now cancels the run it starts. */
  private sending = false;
  private interruptRequested = false;
  private readonly cancelling = new Set<string>();
  private exiting: string | undefined;

  constructor(
    client: KeelClient,
    session: Session,
    io: Io,
    o: { resumed: boolean; reasoning: boolean; agent?: string },
  ) {
    this.client = client;
    this.session = session;
    this.io = io;
    this.o = o;
    this.color = io.out.isTTY === true && !io.env.NO_COLOR;
    this.renderer = new ChatRenderer({ color: this.color, reasoning: o.reasoning });
    this.input = new LineInput(io.in ?? process.stdin, io.out);
  }

  private dim(s: string): string {
    return this.color ? `\x1b[2m${s}\x1b[22m` : s;
  }

  /** Output (above the prompt when one is shown). */
  private print(s: string): void {
    this.input.print(s);
  }

  private note(s: string): void {
    this.print(`${this.renderer.breakLine()}${this.dim(s)}\n`);
  }

  private wake(): void {
    const w = this.wakers;
    this.wakers = [];
    for (const f of w) f();
  }

  private changed(): Promise<void> {
    return new Promise((resolve) => this.wakers.push(resolve));
  }

  private setStatus(runId: string, status: string, seq: number): void {
    const prev = this.statuses.get(runId);
    if (prev && prev.seq >= seq) return;
    this.statuses.set(runId, { status, seq });
    this.wake();
  }

  async run(): Promise<number> {
    const s = this.session;
    this.print(
      `keel chat: session ${s.id} on ${this.client.baseUrl}${s.agent || this.o.agent ? ` (agent ${this.o.agent ?? s.agent})` : ''}\n`,
    );
    this.print(
      this.dim(
        `Enter sends a message. Ctrl-C cancels a running reply; Ctrl-D, /exit or Ctrl-C twice at an empty prompt quits.\n`,
      ),
    );

    this.stream = new SessionStream(this.client, s.id, formatPosition(eventPosition(s.last_seq)), {
      item: (item) => {
        this.print(this.renderer.push(item));
        if (item.kind === 'event' && item.event.type === 'run/status' && item.event.run_id)
          this.setStatus(item.event.run_id, item.event.data.to, item.event.seq);
      },
      state: (st, detail) => {
        if (st === 'lost') this.note('[connection to the server lost; reconnecting…]');
        else if (st === 'open') this.note('[reconnected]');
        else {
          this.note(`[the server refused the stream: ${detail ?? 'error'}]`);
          this.exit('stream refused');
        }
      },
    });
    this.input.onInterrupt = () => this.interrupt();
    this.input.onClose = () => {
      // Ctrl-D while a reply streams quits (a pipe that ends lets the run finish first).
      if (this.input.terminal && this.current) {
        this.note('[quitting: the run continues on the server]');
        this.exit('eof');
      }
    };
    const onAbort = () => {
      // SIGINT/SIGTERM when the terminal is not in raw mode (or a pipe): cancel the running reply and quit.
      if (this.current) void this.cancel(this.current);
      this.exit('signal');
    };
    this.io.signal.addEventListener('abort', onAbort, { once: true });

    try {
      if (this.o.resumed) await this.resume();
      let armed = false;
      while (!this.exiting) {
        const r = await this.input.read('> ');
        if (this.exiting) break;
        if (r.kind === 'eof') break;
        if (r.kind === 'interrupt') {
          if (armed) break;
          armed = true;
          this.note('(press Ctrl-C again, or Ctrl-D, to quit)');
          continue;
        }
        armed = false;
        const text = r.text.trim();
        if (text === '') continue;
        if (text === '/exit' || text === '/quit') break;
        let sent: { run: Run };
        this.sending = true;
        this.interruptRequested = false;
        try {
          sent = await this.client.sessions.send(s.id, {
            content: text,
            if_busy: 'reject',
            ...(this.o.agent ? { agent: this.o.agent } : {}),
          });
        } catch (e) {
          this.sending = false;
          const active = KeelProblem.is(e, 'run_busy') ? e.active_run_id : undefined;
          if (typeof active !== 'string') {
            this.failure(e);
            continue;
          }
          // Another client's run (or one left waiting): follow it; the message was not sent.
          this.note(`[not sent: the session has an active run ${active}; following it (Ctrl-C cancels it)]`);
          const run = await this.retrying(() => this.client.runs.get(active));
          if (run) await this.drive(run);
          continue;
        }
        this.sending = false;
        await this.drive(sent.run);
      }
    } finally {
      this.io.signal.removeEventListener('abort', onAbort);
      this.stream.close();
      this.input.close();
    }
    this.print(`${this.renderer.breakLine()}${this.dim(`session ${s.id}: "keel chat ${s.id}" continues it`)}\n`);
    return 0;
  }

  private exit(why: string): void {
    this.exiting ??= why;
    this.input.abortRead();
    this.wake();
  }

  /** Shows the end of the conversation so far and takes over a run that is still active. */
  private async resume(): Promise<void> {
    try {
      const { items } = (await this.client.sessions.transcript(this.session.id)) as {
        items: Array<{ kind: string; text?: string }>;
      };
      const recent = items.filter((i) => i.kind === 'user' || i.kind === 'assistant').slice(-6);
      for (const i of recent)
        if (i.text) this.print(this.dim(`${i.kind === 'user' ? '> ' : ''}${clipOneLine(i.text, 200)}\n`));
      const runs = (await this.client.sessions.runs(this.session.id, { limit: 1000 })).data;
      const active = runs.filter((r) => !TERMINAL.has(r.status)).at(-1);
      if (active) {
        this.note(`[run ${active.id} is ${active.status}]`);
        await this.drive(active);
      }
    } catch (e) {
      this.failure(e);
    }
  }

  /** Follows a run until it ends (or pauses), answering what it waits for. */
  private async drive(run: Run): Promise<void> {
    this.current = run.id;
    if (!this.statuses.has(run.id)) this.statuses.set(run.id, { status: run.status, seq: 0 });
    if (this.interruptRequested) {
      this.interruptRequested = false;
      void this.cancel(run.id);
    }
    let acted = -1;
    try {
      while (!this.exiting) {
        const s = this.statuses.get(run.id)!;
        if (!SETTLED.has(s.status) || s.seq <= acted) {
          await this.changed();
          continue;
        }
        acted = s.seq;
        if (!WAITING_FOR_PEOPLE.includes(s.status as RunStatus)) return;
        const outcome = await this.answer(run.id);
        if (outcome === 'interrupt') await this.cancel(run.id);
        else if (outcome === 'eof') {
          this.note(`[the run still waits on the server: "keel chat ${this.session.id}" answers it later]`);
          this.exit('eof');
        }
      }
    } finally {
      this.current = undefined;
    }
  }

  /** Asks the user about every open approval or question of a waiting run, and posts the answers. */
  private async answer(runId: string): Promise<Outcome> {
    const run = await this.retrying(() => this.client.runs.get(runId));
    if (!run?.waiting) return 'gone';
    // Typed while the reply streamed, before the question was shown: not an answer to it.
    if (this.input.terminal) this.input.discardTypeahead();
    this.print(this.renderer.breakLine());
    for (const req of run.waiting.requests.filter((r) => !r.decided)) {
      if (req.kind === 'approval') {
        const r = await this.input.read(approvalPrompt(req.tool, req.arguments));
        if (r.kind !== 'line') return r.kind;
        const yes = isYes(r.text);
        const key = randomUUID();
        const ok = await this.post(() =>
          yes
            ? this.client.runs.approve(runId, req.approval_id, { idempotencyKey: key })
            : this.client.runs.deny(runId, req.approval_id, { reason: 'denied in keel chat', idempotencyKey: key }),
        );
        if (!ok) return 'gone';
      } else {
        const questions = questionsOf(req.arguments);
        let answers: unknown;
        if (questions.length === 0) {
          const r = await this.input.read(`${req.tool}(${clipOneLine(JSON.stringify(req.arguments), 200)})? `);
          if (r.kind !== 'line') return r.kind;
          answers = r.text;
        } else {
          const a: Record<string, string> = {};
          for (const q of questions) {
            for (;;) {
              const r: Read = await this.input.read(questionPrompt(q));
              if (r.kind !== 'line') return r.kind;
              const v = parseAnswer(q, r.text);
              if (v !== undefined) {
                a[q.id] = v;
                break;
              }
              this.note(q.choices ? `(answer one of: ${q.choices.join(', ')}, or its number)` : '(an answer, please)');
            }
          }
          answers = a;
        }
        const key = randomUUID();
        const answered = () =>
          this.client.runs.input(runId, answers, { toolCallId: req.tool_call_id, idempotencyKey: key });
        if (!(await this.post(answered))) return 'gone';
      }
    }
    return 'answered';
  }

  /** Ctrl-C while a reply streams: cancel it, keep the session. */
  private interrupt(): void {
    if (!this.current && this.sending) this.interruptRequested = true;
    else if (this.current && !this.cancelling.has(this.current)) void this.cancel(this.current);
    else if (this.current) this.note('(still cancelling; Ctrl-D quits)');
  }

  private async cancel(runId: string): Promise<void> {
    if (this.cancelling.has(runId)) return;
    this.cancelling.add(runId);
    this.note('^C [cancelling the run…]');
    const run = await this.retrying(() => this.client.runs.cancel(runId));
    if (run && TERMINAL.has(run.status)) {
      // The stream normally reports the end first; if it is down, go on without it.
      setTimeout(() => {
        const s = this.statuses.get(runId);
        if (!s || !TERMINAL.has(s.status)) this.setStatus(runId, run.status, Number.MAX_SAFE_INTEGER);
      }, 2000).unref();
    }
  }

  /** A POST that changes the run; false when the run moved on (cancelled, decided elsewhere). */
  private async post(fn: () => Promise<Run>): Promise<boolean> {
    try {
      return (await this.retrying(fn, true)) !== undefined;
    } catch {
      return false;
    }
  }

  /** Retries while the server is unreachable (restarting); undefined after an API error, which is shown. */
  private async retrying<T>(fn: () => Promise<T>, rethrow = false): Promise<T | undefined> {
    let told = false;
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (e) {
        if (e instanceof KeelNetworkError && attempt < 60 && !this.exiting) {
          if (!told) this.note('[the server is unreachable; retrying…]');
          told = true;
          await new Promise((r) => setTimeout(r, 1000));
          continue;
        }
        this.failure(e);
        if (rethrow) throw e;
        return undefined;
      }
    }
  }

  private failure(e: unknown): void {
    let msg = e instanceof Error ? e.message : String(e);
    if (e instanceof KeelProblem && e.status === 401)
      msg = 'the server requires an API key: pass --key or set $KEEL_API_KEY';
    this.print(`${this.renderer.breakLine()}${this.color ? `\x1b[31merror: ${msg}\x1b[39m` : `error: ${msg}`}\n`);
  }
}
