import { FEED_START, isAfter, parsePosition, type FeedPosition } from '../../session/feed-position.ts';
import type { WireDelta, WireEvent } from './wire.ts';

/** One item of a session's SSE stream: a durable event (id `seq`) or a delta (id `seq.n`). */
export type StreamItem =
  { kind: 'event'; id: string; event: WireEvent } | { kind: 'delta'; id: string; delta: WireDelta };

export interface RenderOptions {
  /** ANSI styles (dim notes and tool lines, red failures). */
  color?: boolean;
  /** Show the model's visible reasoning (dim). */
  reasoning?: boolean;
  /** How much of a tool's arguments or result to show. */
  clip?: number;
}

const TERMINAL_NOTES: Record<string, string> = {
  cancelled: 'run cancelled',
  timed_out: 'run timed out',
  paused: 'run paused',
};

export function clipOneLine(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1))}…`;
}

/** A tool call as people read it: `send_report({"to":"team@example.com"})`. */
export function callText(toolName: string, input: unknown, max = 100): string {
  return `${toolName}(${clipOneLine(JSON.stringify(input) ?? '', max)})`;
}

/**
 * Turns stream items into terminal text, with no I/O of its own: the chat writes what `push`
 * returns. Streamed text appears as its deltas arrive; the durable message then adds only what
 * the deltas did not show (none after a normal stream, the rest after a reconnect), so nothing is
 * printed twice. Items seen before (a replay after reconnecting) are skipped by their ids.
 */
export class ChatRenderer {
  private readonly o: Required<RenderOptions>;
  private lastSeq = 0;
  private lastDelta: FeedPosition = FEED_START;
  /** Text (and reasoning) of each message shown from its deltas so far. */
  private readonly shown = new Map<string, { text: string; reasoning: string }>();
  private readonly finished = new Set<string>();
  /** The message whose deltas are being shown and that has no durable version yet. */
  private open: string | undefined;
  /** ask_user calls: the chat asks their questions itself. */
  private readonly interactive = new Set<string>();
  private col0 = true;
  private styleOf: 'text' | 'reasoning' | undefined;

  constructor(o: RenderOptions = {}) {
    this.o = { color: false, reasoning: false, clip: 100, ...o };
  }

  /** The cursor is at the start of a line (a prompt may be shown). */
  get atLineStart(): boolean {
    return this.col0;
  }

  /** What ends the current line, if the last output left it open. */
  breakLine(): string {
    if (this.col0) return '';
    this.col0 = true;
    this.styleOf = undefined;
    return '\n';
  }

  push(item: StreamItem): string {
    if (item.kind === 'delta') return this.delta(item.id, item.delta);
    const e = item.event;
    if (e.seq <= this.lastSeq) return '';
    this.lastSeq = e.seq;
    return this.event(e);
  }

  private dim(s: string): string {
    return this.o.color ? `\x1b[2m${s}\x1b[22m` : s;
  }

  private red(s: string): string {
    return this.o.color ? `\x1b[31m${s}\x1b[39m` : s;
  }

  /** Streamed text of one kind; a line break when the kind changes (reasoning, then text). */
  private stream(kind: 'text' | 'reasoning', s: string): string {
    if (s === '') return '';
    let out = '';
    if (this.styleOf !== undefined && this.styleOf !== kind) out += this.breakLine();
    this.styleOf = kind;
    out += kind === 'reasoning' ? this.dim(s) : s;
    this.col0 = s.endsWith('\n');
    return out;
  }

  /** A note on a line of its own. */
  private note(s: string, style: 'dim' | 'red' = 'dim'): string {
    const out = `${this.breakLine()}${style === 'red' ? this.red(s) : this.dim(s)}\n`;
    this.col0 = true;
    return out;
  }

  private delta(id: string, d: WireDelta): string {
    const at = parsePosition(id);
    if (this.finished.has(d.message_id)) return '';
    if (at) {
      if (!isAfter(at, this.lastDelta)) return '';
      this.lastDelta = at;
    }
    if (d.type === 'tool-input/delta') return '';
    if (d.type === 'reasoning/delta' && !this.o.reasoning) return '';
    let out = '';
    if (this.open !== undefined && this.open !== d.message_id) out += this.abandon();
    this.open = d.message_id;
    const s = this.shown.get(d.message_id) ?? { text: '', reasoning: '' };
    this.shown.set(d.message_id, s);
    if (d.type === 'text/delta') s.text += d.delta;
    else s.reasoning += d.delta;
    return out + this.stream(d.type === 'text/delta' ? 'text' : 'reasoning', d.delta);
  }

  /** The message being streamed will not be completed (a retry, or a worker that was lost). */
  private abandon(): string {
    const id = this.open;
    this.open = undefined;
    if (id === undefined) return '';
    this.finished.add(id);
    return this.note('[interrupted: the model call is redone]');
  }

  private event(e: WireEvent): string {
    switch (e.type) {
      case 'request/header':
        // A new model call while another message is half shown: that one was abandoned.
        return this.open !== undefined && this.open !== e.data.messageId ? this.abandon() : '';
      case 'assistant/message': {
        const m = e.data.message;
        if (this.open === m.id) this.open = undefined;
        this.finished.add(m.id);
        const seen = this.shown.get(m.id) ?? { text: '', reasoning: '' };
        this.shown.delete(m.id);
        let out = '';
        if (this.o.reasoning) {
          const reasoning = m.content.map((p) => (p.type === 'reasoning' ? p.text : '')).join('');
          out += this.stream(
            'reasoning',
            reasoning.startsWith(seen.reasoning) ? reasoning.slice(seen.reasoning.length) : reasoning,
          );
        }
        const text = m.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
        // Only what the deltas did not show (all of it, if we joined after they were sent).
        if (text.startsWith(seen.text)) out += this.stream('text', text.slice(seen.text.length));
        else out += this.breakLine() + this.stream('text', text);
        if (m.interrupted && !this.col0) out += this.dim(' …');
        return out + this.breakLine();
      }
      case 'user/question':
        this.interactive.add(e.data.toolCallId);
        return this.breakLine();
      case 'tool/call':
        if (this.interactive.has(e.data.toolCallId) || e.data.toolName === 'ask_user') return '';
        return this.note(`  → ${callText(e.data.toolName, e.data.input, this.o.clip)}`);
      case 'tool/result': {
        if (this.interactive.has(e.data.toolCallId) || e.data.toolName === 'ask_user') return '';
        const o = e.data.output;
        if (o.type === 'error')
          return this.note(
            `  ✗ ${e.data.toolName}: ${o.code === 'denied' ? 'denied' : o.code}${o.message ? ` (${clipOneLine(o.message, this.o.clip)})` : ''}`,
            o.code === 'denied' || o.code === 'cancelled' ? 'dim' : 'red',
          );
        return this.note(
          `  ← ${e.data.toolName}: ${clipOneLine(o.type === 'text' ? o.value : JSON.stringify(o.value), this.o.clip)}`,
        );
      }
      case 'tool/approval':
        return this.breakLine();
      case 'model/retry':
        this.finished.add(e.data.abandonedMessageId);
        if (this.open === e.data.abandonedMessageId) this.open = undefined;
        return this.note(
          `[model call failed (${clipOneLine(e.data.error.message, 80)}); retrying in ${Math.round(e.data.delayMs / 100) / 10}s]`,
        );
      case 'model/error':
        return e.data.willCompact ? this.note('[the context is too long: compacting it]') : '';
      case 'compaction':
        return this.note(`[context compacted: ${e.data.tokensBefore} → ${e.data.tokensAfter} tokens]`);
      case 'run/interrupted':
        return (
          (this.open !== undefined ? this.abandon() : '') +
          this.note(
            `[the worker running this stopped (${e.data.reason === 'lease_expired' ? 'lost' : 'released'}); resuming after step ${e.data.step}]`,
          )
        );
      case 'run/status': {
        const to = e.data.to;
        if (to === 'failed') {
          const err = e.data.error as { message?: unknown } | undefined;
          return this.note(
            `[run failed: ${typeof err?.message === 'string' ? err.message : (e.data.reason ?? 'unknown error')}]`,
            'red',
          );
        }
        const note = TERMINAL_NOTES[to];
        if (note === undefined) return '';
        this.open = undefined;
        return this.note(`[${note}]`);
      }
      default:
        return '';
    }
  }
}

export interface Question {
  id: string;
  question: string;
  choices?: string[];
}

/** The questions of an ask_user call (tolerant of what a model may send). */
export function questionsOf(input: unknown): Question[] {
  const qs = (input as { questions?: unknown } | null)?.questions;
  if (!Array.isArray(qs)) return [];
  return qs.flatMap((q, i) => {
    const o = q as { id?: unknown; question?: unknown; choices?: unknown };
    if (typeof o?.question !== 'string') return [];
    const choices = Array.isArray(o.choices) ? o.choices.filter((c): c is string => typeof c === 'string') : undefined;
    return [
      {
        id: typeof o.id === 'string' && o.id !== '' ? o.id : `q${i + 1}`,
        question: o.question,
        ...(choices && choices.length > 0 ? { choices } : {}),
      },
    ];
  });
}

/** The prompt for one question: `Celsius or Fahrenheit? [celsius/fahrenheit] `. */
export function questionPrompt(q: Question): string {
  return `${q.question}${q.choices ? ` [${q.choices.join('/')}]` : ''} `;
}

/**
 * Reads an answer to a question: with choices, one of them (by name, case-insensitive, or by its
 * number from 1); otherwise any non-empty text. undefined when it is not an answer (ask again).
 */
export function parseAnswer(q: Question, raw: string): string | undefined {
  const s = raw.trim();
  if (s === '') return undefined;
  if (!q.choices) return s;
  const byName = q.choices.find((c) => c.toLowerCase() === s.toLowerCase());
  if (byName !== undefined) return byName;
  const n = Number(s);
  if (Number.isInteger(n) && n >= 1 && n <= q.choices.length) return q.choices[n - 1];
  const prefixed = q.choices.filter((c) => c.toLowerCase().startsWith(s.toLowerCase()));
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** `Approve send_report({...})? [y/N] ` */
export function approvalPrompt(toolName: string, args: unknown, max = 200): string {
  return `Approve ${callText(toolName, args, max)}? [y/N] `;
}

/** y / yes approve; anything else denies. */
export const isYes = (raw: string): boolean => /^\s*y(es)?\s*$/i.test(raw);
