/**
 * A2A push notifications on Keel's webhook outbox (issue 41), with `@a2a-js/sdk`'s client on both
 * backends: a config given with a message, and one set on a waiting task, deliver the task's state
 * when set and every change after (a StreamResponse status update, with the config's token or
 * credentials), to a local receiver that fails first attempts (retried); get, list and delete them.
 */
import { StreamResponse, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { a2aClient, asTask, sendRequest } from '../support/a2a-client.ts';
import { BACKENDS, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';
import { Receiver, type Received } from '../webhooks/receiver.ts';

describe.each(BACKENDS)('A2A push notifications (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let client: Client;
  let other: Client;
  const receiver = new Receiver();

  beforeAll(async () => {
    await receiver.start();
    srv = await startTestServer({
      backend,
      keys: [{ tenant: 'acme' }, { tenant: 'globex' }],
      // Retries within the test's time.
      webhooks: { baseDelayMs: 50, maxDelayMs: 100, pollMs: 50 },
    });
    acme = srv.api(srv.secrets[0]);
    client = await a2aClient(srv.url, 'helper', srv.secrets[0]);
    other = await a2aClient(srv.url, 'helper', srv.secrets[1]);
  });
  afterAll(async () => {
    await srv?.close();
    await receiver.stop();
  });

  /** The deliveries of a task that got a 2xx, once each (by Keel's delivery id), as status updates. */
  const delivered = (taskId: string) => {
    const seen = new Set<string>();
    return receiver.received.flatMap((r: Received) => {
      if (r.status >= 300) return [];
      const update = StreamResponse.fromJSON(JSON.parse(r.body)).payload;
      if (update?.$case !== 'statusUpdate' || update.value.taskId !== taskId) return [];
      const id = String(r.headers['keel-delivery']);
      if (seen.has(id)) return [];
      seen.add(id);
      return [{ state: update.value.status!.state, headers: r.headers, update: update.value }];
    });
  };
  /** Pushes in the order of the changes they say (their status timestamps). */
  const byTime = <T extends { update: { status?: { timestamp?: string } } }>(pushes: T[]): T[] =>
    [...pushes].sort((a, b) => Date.parse(a.update.status!.timestamp!) - Date.parse(b.update.status!.timestamp!));
  const until = (taskId: string, state: TaskState) =>
    acme.until(`a push of ${TaskState[state]}`, async () =>
      delivered(taskId).some((d) => d.state === state) ? true : undefined,
    );

  it('a config given with the message: the task’s state, then every change, with its token; failed attempts are retried', async () => {
    // The first two attempts fail: the delivery comes again.
    receiver.queue.push(500, 500);
    const task = asTask(
      await client.sendMessage(
        sendRequest('block:push', {
          configuration: { returnImmediately: true, taskPushNotificationConfig: { url: receiver.url, token: 'tok-1' } },
        }),
      ),
    );
    await srv.gates.entered('push');
    // The state when the config was set arrives (retried) before the run goes on: order is not
    // guaranteed across deliveries, only their arrival.
    await acme.until('the first push', async () => (delivered(task.id).length > 0 ? true : undefined));
    srv.gates.open('push');
    await until(task.id, TaskState.TASK_STATE_COMPLETED);
    const pushes = delivered(task.id);
    // From the state it had when the config was set (submitted or working) to completed, each state
    // once (deliveries may arrive in any order: by the time of the change they say, completed is last).
    const states = byTime(pushes).map((p) => p.state);
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(new Set(states).size).toBe(states.length);
    for (const p of pushes) {
      expect(p.headers['x-a2a-notification-token']).toBe('tok-1');
      expect(p.headers['content-type']).toBe('application/a2a+json');
      expect(p.update.contextId).toBe(task.contextId);
    }
    expect(receiver.received.filter((r) => r.status === 500).length).toBe(2);
    // The configs of the task.
    const list = await client.listTaskPushNotificationConfig({
      tenant: '',
      taskId: task.id,
      pageSize: 0,
      pageToken: '',
    });
    expect(list.configs).toMatchObject([{ taskId: task.id, url: receiver.url, token: 'tok-1' }]);
  });

  it('a config set on a waiting task: its credentials as Authorization; get, list, delete; another tenant’s task is not found', async () => {
    const waiting = asTask(await client.sendMessage(sendRequest('ask')));
    const config = {
      tenant: '',
      id: 'cfg-2',
      taskId: waiting.id,
      url: receiver.url,
      token: '',
      authentication: { scheme: 'Bearer', credentials: 's3cret' },
    };
    await expect(other.createTaskPushNotificationConfig(config)).rejects.toBeInstanceOf(TaskNotFoundError);
    const set = await client.createTaskPushNotificationConfig(config);
    // Credentials are not shown again.
    expect(set).toMatchObject({ id: 'cfg-2', taskId: waiting.id, url: receiver.url });
    expect(set.authentication).toEqual({ scheme: 'Bearer', credentials: '' });
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, id: 'cfg-2' })).toEqual(set);
    await until(waiting.id, TaskState.TASK_STATE_INPUT_REQUIRED);
    await client.sendMessage(sendRequest('red', { taskId: waiting.id }));
    await until(waiting.id, TaskState.TASK_STATE_COMPLETED);
    const pushes = delivered(waiting.id);
    expect(pushes.map((p) => p.state).sort()).toEqual(
      [TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED].sort(),
    );
    expect(byTime(pushes)[0]!.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(pushes.every((p) => p.headers.authorization === 'Bearer s3cret')).toBe(true);

    // Set again with the same id: replaced, not added.
    await client.createTaskPushNotificationConfig({ ...config, authentication: undefined, token: 't2' });
    const list = await client.listTaskPushNotificationConfig({
      tenant: '',
      taskId: waiting.id,
      pageSize: 0,
      pageToken: '',
    });
    expect(list.configs.map((c) => [c.id, c.token])).toEqual([['cfg-2', 't2']]);
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, id: 'cfg-2' });
    expect(
      (await client.listTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, pageSize: 0, pageToken: '' }))
        .configs,
    ).toEqual([]);
    await expect(
      client.getTaskPushNotificationConfig({ tenant: '', taskId: waiting.id, id: 'cfg-2' }),
    ).rejects.toBeInstanceOf(TaskNotFoundError);
    // Not among the tenant's own webhook subscriptions.
    expect((await acme.get('/v1/webhooks')).body.data).toEqual([]);
  });
});
