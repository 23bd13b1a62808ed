import { describe, expect, it } from 'vitest';
import type { WireEvent } from '../../src/cli/chat/wire.ts';
import {
  approvalPrompt,
  ChatRenderer,
  isYes,
  parseAnswer,
  questionPrompt,
  questionsOf,
  type StreamItem,
} from '../../src/cli/chat/render.ts';

/** Stream items as the server sends them (only the fields the renderer reads matter). */
const ev = (seq: number, type: string, data: unknown): StreamItem => ({
  kind: 'event',
  id: String(seq),
  event: {
    id: `e${seq}`,
    session_id: 's',
    seq,
    type,
    v: 1,
    time: '',
    run_id: 'r1',
    entry: false,
    data,
  } as unknown as WireEvent,
});
const delta = (
  id: string,
  messageId: string,
  text: string,
  type: 'text/delta' | 'reasoning/delta' = 'text/delta',
): StreamItem => ({
  kind: 'delta',
  id,
  delta: { type, turn: 1, step: 1, message_id: messageId, delta: text },
});
const header = (seq: number, messageId: string) => ev(seq, 'request/header', { messageId });
const message = (seq: number, id: string, text: string, extra: unknown[] = []) =>
  ev(seq, 'assistant/message', {
    message: { id, role: 'assistant', content: [...(text ? [{ type: 'text', text }] : []), ...extra] },
  });
const render = (r: ChatRenderer, items: StreamItem[]) => items.map((i) => r.push(i)).join('');

describe('ChatRenderer', () => {
  it('shows text as it streams, and the durable message adds nothing more', () => {
    const r = new ChatRenderer();
    expect(render(r, [header(7, 'm1'), delta('7.1', 'm1', 'Hello '), delta('7.2', 'm1', 'world.')])).toBe(
      'Hello world.',
    );
    expect(r.atLineStart).toBe(false);
    expect(r.push(message(8, 'm1', 'Hello world.'))).toBe('\n');
    expect(r.atLineStart).toBe(true);
  });

  it('skips what it has seen when the stream resumes, and completes a half-shown message', () => {
    const r = new ChatRenderer();
    const first = [header(7, 'm1'), delta('7.1', 'm1', 'Let me '), delta('7.2', 'm1', 'check ')];
    expect(render(r, first)).toBe('Let me check ');
    // Reconnected with Last-Event-ID 7.2: anything at or before it again shows nothing.
    expect(render(r, first)).toBe('');
    // The rest arrives as the durable message only (the deltas were lost with the old server).
    expect(r.push(message(8, 'm1', 'Let me check the weather.'))).toBe('the weather.\n');
    expect(r.push(message(8, 'm1', 'Let me check the weather.'))).toBe('');
    expect(r.push(delta('7.3', 'm1', 'the '))).toBe('');
  });

  it('shows a whole message that arrives without deltas', () => {
    const r = new ChatRenderer();
    expect(r.push(message(3, 'm1', 'All of it.'))).toBe('All of it.\n');
  });

  it('marks a half-shown message that was abandoned for a new model call', () => {
    const r = new ChatRenderer();
    expect(render(r, [header(7, 'm1'), delta('7.1', 'm1', 'Let me')])).toBe('Let me');
    expect(
      render(r, [
        ev(8, 'run/interrupted', { attempt: 2, step: 0, reason: 'lease_expired' }),
        header(9, 'm2'),
        delta('9.1', 'm2', 'Let me check.'),
      ]),
    ).toBe(
      '\n[interrupted: the model call is redone]\n[the worker running this stopped (lost); resuming after step 0]\nLet me check.',
    );
    expect(
      render(r, [
        ev(10, 'model/retry', {
          attempt: 1,
          delayMs: 1500,
          error: { kind: 'transient', message: 'overloaded' },
          abandonedMessageId: 'm2',
        }),
      ]),
    ).toBe('\n[model call failed (overloaded); retrying in 1.5s]\n');
    expect(r.push(delta('9.2', 'm2', ' more'))).toBe('');
  });

  it('shows tool calls and results compactly, but not ask_user (the chat asks it)', () => {
    const r = new ChatRenderer();
    const out = render(r, [
      message(1, 'm1', 'Looking.', [
        { type: 'tool-call', toolCallId: 'c1', toolName: 'get_weather', input: { city: 'paris' } },
      ]),
      ev(2, 'tool/call', { toolCallId: 'c1', toolName: 'get_weather', input: { city: 'paris' } }),
      ev(3, 'tool/result', {
        toolCallId: 'c1',
        toolName: 'get_weather',
        output: { type: 'json', value: { celsius: 18 } },
      }),
      ev(4, 'tool/result', {
        toolCallId: 'c2',
        toolName: 'send_report',
        output: { type: 'error', code: 'denied', message: 'no' },
      }),
      ev(5, 'tool/result', {
        toolCallId: 'c3',
        toolName: 'fetch',
        output: { type: 'error', code: 'execution_error', message: 'boom' },
      }),
      ev(6, 'user/question', { toolCallId: 'q1', toolName: 'ask_user', input: {} }),
      ev(7, 'tool/call', { toolCallId: 'q1', toolName: 'ask_user', input: {} }),
      ev(8, 'tool/result', { toolCallId: 'q1', toolName: 'ask_user', output: { type: 'json', value: {} } }),
      ev(9, 'tool/result', { toolCallId: 'c4', toolName: 'read', output: { type: 'text', value: 'x'.repeat(300) } }),
    ]);
    expect(out).toBe(
      [
        'Looking.',
        '  → get_weather({"city":"paris"})',
        '  ← get_weather: {"celsius":18}',
        '  ✗ send_report: denied (no)',
        '  ✗ fetch: execution_error (boom)',
        `  ← read: ${'x'.repeat(99)}…`,
        '',
      ].join('\n'),
    );
  });

  it('notes how a run ended unless it completed', () => {
    const r = new ChatRenderer();
    const status = (seq: number, to: string, extra: object = {}) =>
      ev(seq, 'run/status', { from: 'running', to, attempt: 1, ...extra });
    expect(r.push(status(1, 'completed'))).toBe('');
    expect(r.push(status(2, 'cancelled'))).toBe('[run cancelled]\n');
    expect(r.push(status(3, 'failed', { reason: 'x', error: { message: 'the model refused' } }))).toBe(
      '[run failed: the model refused]\n',
    );
    expect(r.push(status(4, 'timed_out'))).toBe('[run timed out]\n');
    expect(r.push(status(5, 'waiting_approval'))).toBe('');
  });

  it('shows reasoning only when asked, dimmed when colored', () => {
    const plain = new ChatRenderer();
    expect(render(plain, [delta('1.1', 'm1', 'hmm', 'reasoning/delta'), delta('1.2', 'm1', 'Hi')])).toBe('Hi');
    const r = new ChatRenderer({ reasoning: true, color: true });
    expect(
      render(r, [
        delta('1.1', 'm1', 'hmm', 'reasoning/delta'),
        delta('1.2', 'm1', 'Hi'),
        message(2, 'm1', 'Hi', [{ type: 'reasoning', text: 'hmm' }]),
      ]),
    ).toBe('\x1b[2mhmm\x1b[22m\nHi\n');
  });
});

describe('prompts', () => {
  it('asks for approval with the call', () => {
    expect(approvalPrompt('send_report', { to: 'a@b.c' })).toBe('Approve send_report({"to":"a@b.c"})? [y/N] ');
    expect(['y', 'Y', 'yes', ' YES '].every(isYes)).toBe(true);
    expect(['', 'n', 'no', 'yep', 'sure'].some(isYes)).toBe(false);
  });

  it('reads ask_user questions and their answers', () => {
    const qs = questionsOf({
      questions: [
        { id: 'units', question: 'Celsius or Fahrenheit?', choices: ['celsius', 'fahrenheit'] },
        { question: 'Name?' },
        { nope: 1 },
      ],
    });
    expect(qs).toEqual([
      { id: 'units', question: 'Celsius or Fahrenheit?', choices: ['celsius', 'fahrenheit'] },
      { id: 'q2', question: 'Name?' },
    ]);
    expect(questionPrompt(qs[0]!)).toBe('Celsius or Fahrenheit? [celsius/fahrenheit] ');
    expect(questionPrompt(qs[1]!)).toBe('Name? ');
    expect(['Celsius', '1', 'c', ' fahrenheit ', '2', 'f', '3', 'x', ''].map((a) => parseAnswer(qs[0]!, a))).toEqual([
      'celsius',
      'celsius',
      'celsius',
      'fahrenheit',
      'fahrenheit',
      'fahrenheit',
      undefined,
      undefined,
      undefined,
    ]);
    expect(parseAnswer(qs[1]!, '  Ada ')).toBe('Ada');
    expect(parseAnswer(qs[1]!, '  ')).toBeUndefined();
    expect(questionsOf(null)).toEqual([]);
  });
});
