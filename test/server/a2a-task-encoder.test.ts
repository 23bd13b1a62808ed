/**
 * The A2A task encoder on its own (server/protocols/a2a/task-encoder.ts): a pure function of the
 * run's feed items. The task at the run's first status, a status update per state change, text as
 * artifact chunks that end with the durable message; a snapshot mid-message followed by only the
 * rest; a message whose first deltas the feed never had replaced whole; an abandoned one emptied.
 */
import type { StreamResponse } from '@a2a-js/sdk';
import { describe, expect, it } from 'vitest';
import type { FeedItem } from '../../src/session/index.ts';
import { TaskEncoder } from '../../src/server/protocols/a2a/task-encoder.ts';
import { kinds, rebuild, textOf } from '../support/a2a-client.ts';

const run = { id: 'r1', sessionId: 's1' };
let seq = 0;
const event = (type: string, data: unknown): FeedItem =>
  ({
    kind: 'event',
    event: { id: `e${++seq}`, seq, time: 1_000 + seq, sessionId: 's1', runId: 'r1', type, data },
  }) as never;
const status = (from: string | null, to: string) => event('run/status', { from, to, attempt: 1 });
const delta = (messageId: string, text: string): FeedItem =>
  ({ kind: 'delta', id: `${seq}.1`, delta: { type: 'text/delta', turn: 1, step: 1, messageId, delta: text } }) as never;
const message = (id: string, text: string) =>
  event('assistant/message', { message: { id, role: 'assistant', content: [{ type: 'text', text }] } });
const user = (text: string) =>
  event('user/message', { message: { id: 'u1', role: 'user', content: [{ type: 'text', text }] }, via: 'input' });

const feed = (encoder: TaskEncoder, items: FeedItem[]): StreamResponse[] => items.flatMap((i) => encoder.item(i));
const artifactChunks = (events: StreamResponse[]) =>
  events.flatMap((e) => (e.payload?.$case === 'artifactUpdate' ? [e.payload.value] : []));

describe('A2A task encoder', () => {
  it('makes the task at the run’s first status, then state changes and text chunks', () => {
    const e = new TaskEncoder(run);
    const events = feed(e, [
      user('hi'),
      status(null, 'queued'),
      status('queued', 'running'),
      delta('m1', 'hel'),
      delta('m1', 'lo'),
      message('m1', 'hello'),
      status('running', 'completed'),
    ]);
    expect(kinds(events)).toEqual([
      'task:SUBMITTED',
      'status:WORKING',
      'artifactUpdate',
      'artifactUpdate',
      'artifactUpdate',
      'status:COMPLETED',
    ]);
    expect(artifactChunks(events).map((c) => [textOf(c.artifact), c.append, c.lastChunk])).toEqual([
      ['hel', false, false],
      ['lo', true, false],
      ['', true, true],
    ]);
    expect(e.snapshot().artifacts.map(textOf)).toEqual(['hello']);
  });

  it('a snapshot mid-message has the text so far; what follows appends only the rest', () => {
    const e = new TaskEncoder(run);
    feed(e, [
      user('hi'),
      status(null, 'queued'),
      status('queued', 'running'),
      delta('m1', 'one '),
      delta('m1', 'two '),
    ]);
    const snapshot = e.snapshotEvent();
    expect(kinds([snapshot])).toEqual(['task:WORKING']);
    const after = feed(e, [delta('m1', 'three'), message('m1', 'one two three'), status('running', 'completed')]);
    expect(kinds(after)).toEqual(['artifactUpdate', 'artifactUpdate', 'status:COMPLETED']);
    expect(artifactChunks(after).every((c) => c.append)).toBe(true);
    expect([...rebuild([snapshot, ...after]).values()]).toEqual(['one two three']);
  });

  it('replaces a message whose first deltas it never had; empties an abandoned one; says a state once', () => {
    const e = new TaskEncoder(run);
    const events = feed(e, [
      status(null, 'queued'),
      status('queued', 'running'),
      delta('m1', 'lo'),
      message('m1', 'hello'),
      delta('m2', 'partial'),
      event('model/retry', { attempt: 1, delayMs: 0, error: {}, abandonedMessageId: 'm2' }),
      status('running', 'sleeping'),
      status('sleeping', 'queued'),
      status('queued', 'running'),
      status('running', 'failed'),
    ]);
    expect(kinds(events).filter((k) => k.startsWith('status:'))).toEqual(['status:WORKING', 'status:FAILED']);
    const chunks = artifactChunks(events);
    expect(chunks.map((c) => [c.artifact?.artifactId, textOf(c.artifact), c.append, c.lastChunk])).toEqual([
      ['m1', 'lo', false, false],
      ['m1', 'hello', false, true],
      ['m2', 'partial', false, false],
      ['m2', '', false, true],
    ]);
    expect(e.snapshot().artifacts.map(textOf)).toEqual(['hello']);
  });
});
