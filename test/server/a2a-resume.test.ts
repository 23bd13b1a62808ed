/**
 * A2A streams that resume (issue 41, ADR-0038), with `@a2a-js/sdk`'s client on both backends: a
 * client that went away mid-run resubscribes (SubscribeToTask) and gets the task as it stands, then
 * the rest: nothing lost, nothing said twice (checked against the session log), also mid-message;
 * and a task survives a restart of the server: got, resubscribed, answered, finished.
 */
import type { StreamResponse, Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  a2aClient,
  artifactText,
  asTask,
  collect,
  kinds,
  rebuild,
  sendRequest,
  TaskState,
  textOf,
} from '../support/a2a-client.ts';
import { BACKENDS, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';

/** Reads a stream until `stop` holds for what it got, then the client goes (its request aborted). */
async function readUntil(
  open: (signal: AbortSignal) => AsyncIterable<StreamResponse>,
  stop: (events: StreamResponse[]) => boolean,
): Promise<StreamResponse[]> {
  const gone = new AbortController();
  const got: StreamResponse[] = [];
  await collect(open(gone.signal), (e) => {
    got.push(e);
    return stop(got);
  });
  gone.abort();
  return got;
}

const taskOf = (events: readonly StreamResponse[]): Task => events[0]!.payload!.value as Task;
const chunks = (events: readonly StreamResponse[]) =>
  events.flatMap((e) => (e.payload?.$case === 'artifactUpdate' ? [e.payload.value] : []));

describe.each(BACKENDS)('A2A resubscription and restarts (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let client: Client;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }] });
    acme = srv.api(srv.secrets[0]);
    client = await a2aClient(srv.url, 'helper', srv.secrets[0]);
  });
  afterAll(async () => {
    await srv?.close();
  });

  /** The assistant texts of a session's log, in order. */
  const loggedAnswers = async (sessionId: string): Promise<string[]> =>
    (await acme.allEvents(sessionId))
      .filter((e) => e.type === 'assistant/message')
      .map((e) => e.data.message.content.map((p: { text?: string }) => p.text ?? '').join(''))
      .filter((t: string) => t !== '');

  it('a client that went mid-run resubscribes: the task as it stands, then the rest, nothing twice', async () => {
    const before = await readUntil(
      (signal) => client.sendMessageStream(sendRequest('block:r/resumed fine'), { signal }),
      (events) => kinds(events).includes('status:WORKING'),
    );
    expect(kinds(before)).toEqual(['task:SUBMITTED', 'status:WORKING']);
    const task = taskOf(before);
    await srv.gates.entered('r');
    // The run went on without the client.
    const sub = client.resubscribeTask({ tenant: '', id: task.id })[Symbol.asyncIterator]();
    const first = await sub.next();
    expect(kinds([first.value as StreamResponse])).toEqual(['task:WORKING']);
    srv.gates.open('r');
    const rest: StreamResponse[] = [];
    for (let r = await sub.next(); !r.done; r = await sub.next()) rest.push(r.value);
    const after = [first.value as StreamResponse, ...rest];
    // What follows the snapshot is new: no second working, the answer, the end.
    expect(kinds(after).filter((k) => k.startsWith('status:'))).toEqual(['status:COMPLETED']);
    const rebuilt = rebuild(after, rebuild(before));
    expect([...rebuilt.values()]).toEqual(['done resumed fine']);
    expect([...rebuilt.values()]).toEqual(await loggedAnswers(task.contextId));
    expect(artifactText(await client.getTask({ tenant: '', id: task.id }))).toBe('done resumed fine');
  });

  it('resubscribed mid-message: the snapshot has the text so far, the chunks after it only the rest', async () => {
    const words = Array.from({ length: 250 }, (_, i) => `w${i}`);
    const full = words.join(' ');
    const before = await readUntil(
      (signal) => client.sendMessageStream(sendRequest(`slow:${full}`), { signal }),
      (events) => chunks(events).length >= 3,
    );
    const had = [...rebuild(before).values()][0]!;
    expect(full.startsWith(had)).toBe(true);
    const after = await collect(client.resubscribeTask({ tenant: '', id: taskOf(before).id }));
    const snapshot = taskOf(after);
    const soFar = snapshot.artifacts.map(textOf).join('');
    // The snapshot has at least what the client had, and what comes after it is only the rest.
    expect(soFar.startsWith(had)).toBe(true);
    const later = chunks(after);
    if (soFar !== '') expect(later.every((c) => c.append)).toBe(true);
    expect(soFar + later.map((c) => textOf(c.artifact)).join('')).toBe(full);
    expect([...rebuild(after).values()]).toEqual([full]);
    expect(await loggedAnswers(snapshot.contextId)).toEqual([full]);
    expect(kinds(after).at(-1)).toBe('status:COMPLETED');
  });

  it('a task survives a restart of the server: got, resubscribed, answered, finished', async () => {
    const asked = asTask(await client.sendMessage(sendRequest('ask')));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    await srv.restart();
    const got = await client.getTask({ tenant: '', id: asked.id });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(got.status?.message?.parts[0]?.content).toEqual({ $case: 'text', value: 'Which color? (red, blue)' });
    // Resubscribed while it waits for the client: the task, and the stream ends (it is interrupted).
    expect(kinds(await collect(client.resubscribeTask({ tenant: '', id: asked.id })))).toEqual(['task:INPUT_REQUIRED']);
    const answered = await collect(client.sendMessageStream(sendRequest('blue', { taskId: asked.id })));
    expect(kinds(answered).at(-1)).toMatch(/:COMPLETED$/);
    expect([...rebuild(answered).values()]).toEqual(['done']);

    // A task running when the server stops: its run is handed back, taken up again, and its stream goes on.
    const words = Array.from({ length: 250 }, (_, i) => `r${i}`).join(' ');
    const before = await readUntil(
      (signal) => client.sendMessageStream(sendRequest(`slow:${words}`), { signal }),
      (events) => chunks(events).length >= 2,
    );
    const id = taskOf(before).id;
    await srv.restart();
    const after = await collect(client.resubscribeTask({ tenant: '', id }));
    expect(kinds(after)[0]).toMatch(/^task:(SUBMITTED|WORKING|COMPLETED)$/);
    expect(kinds(after).at(-1)).toMatch(/:COMPLETED$/);
    // The message the stopped attempt streamed was never finished: the answer is the new attempt's, once.
    expect([...rebuild(after).values()].filter((t) => t !== '')).toEqual([words]);
    expect(await loggedAnswers(taskOf(before).contextId)).toEqual([words]);
  });
});
