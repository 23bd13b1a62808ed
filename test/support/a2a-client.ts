/**
 * The A2A SDK's own client (`@a2a-js/sdk`) pointed at a test server's A2A endpoint, and small
 * helpers to read what it returns: messages made with the SDK's types, a stream's events collected,
 * artifacts rebuilt from their chunks as the protocol says (`append: false` starts or replaces one).
 */
import { Message, SendMessageRequest, TaskState, type Artifact, type StreamResponse, type Task } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';

/** A fetch that sends `secret` as a Bearer key (none: as is). */
export const fetchWithKey =
  (secret?: string): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    if (secret !== undefined) headers.set('authorization', `Bearer ${secret}`);
    return fetch(input, { ...init, headers });
  };

/** A client made the SDK's way: its factory fetches the agent's card from `…/a2a/{agent}/`. */
export async function a2aClient(base: string, agent = 'helper', secret?: string): Promise<Client> {
  const fetchImpl = fetchWithKey(secret);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(`${base}/a2a/${agent}/`);
}

/** A user message (ProtoJSON parts: `{text}` or `{data}`), for a task or a context. */
export function userMessage(
  parts: string | Array<{ text: string } | { data: unknown }>,
  o: { taskId?: string; contextId?: string } = {},
): Message {
  return Message.fromJSON({
    messageId: crypto.randomUUID(),
    role: 'ROLE_USER',
    parts: typeof parts === 'string' ? [{ text: parts }] : parts,
    ...o,
  });
}

/** A SendMessage request (ProtoJSON `configuration`: `returnImmediately`, `taskPushNotificationConfig`, …). */
export function sendRequest(
  parts: string | Array<{ text: string } | { data: unknown }>,
  o: { taskId?: string; contextId?: string; configuration?: Record<string, unknown> } = {},
): SendMessageRequest {
  const { configuration, ...ids } = o;
  return SendMessageRequest.fromJSON({
    message: Message.toJSON(userMessage(parts, ids)),
    ...(configuration ? { configuration } : {}),
  });
}

/** A task the client got back (SendMessage answers a task, never a bare message here). */
export function asTask(x: Task | Message): Task {
  if (!('status' in x)) throw new Error(`expected a task, got a message: ${JSON.stringify(x)}`);
  return x;
}

export const textOf = (a: Pick<Artifact, 'parts'> | undefined): string =>
  (a?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

/** The text of a task's artifacts, in order. */
export const artifactText = (t: Task): string => t.artifacts.map(textOf).join('');

/** Collects a stream's events, until `stopAfter` holds for one (the client then goes away). */
export async function collect(
  stream: AsyncIterable<StreamResponse>,
  stopAfter?: (e: StreamResponse) => boolean,
): Promise<StreamResponse[]> {
  const out: StreamResponse[] = [];
  for await (const e of stream) {
    out.push(e);
    if (stopAfter?.(e)) break;
  }
  return out;
}

/** The kinds of a stream's events, with the state of task and status events (`task:WORKING`). */
export const kinds = (events: readonly StreamResponse[]): string[] =>
  events.map((e) => {
    const p = e.payload!;
    if (p.$case === 'task') return `task:${TaskState[p.value.status!.state].replace('TASK_STATE_', '')}`;
    if (p.$case === 'statusUpdate') return `status:${TaskState[p.value.status!.state].replace('TASK_STATE_', '')}`;
    return p.$case;
  });

/**
 * Artifacts (by id, in order) as a client keeps them from a stream: a `task` event's artifacts as
 * they are, then each chunk appended (`append`) or starting the artifact afresh.
 */
export function rebuild(events: readonly StreamResponse[], from = new Map<string, string>()): Map<string, string> {
  const out = new Map(from);
  for (const e of events) {
    const p = e.payload!;
    if (p.$case === 'task') for (const a of p.value.artifacts) out.set(a.artifactId, textOf(a));
    if (p.$case === 'artifactUpdate') {
      const a = p.value.artifact!;
      out.set(a.artifactId, (p.value.append ? (out.get(a.artifactId) ?? '') : '') + textOf(a));
    }
  }
  return out;
}

export { TaskState };
