/**
 * A run's approvals and questions asked of the MCP client by form elicitation
 * (`elicitation/create`), where the client declared it can answer them.
 *
 * The server keeps no state between requests. So the request's JSON-RPC id names the run and the
 * call (`keel-elicit.<base64url of [runId, toolCallId]>`). The client's answer comes in a POST of
 * its own, which any server process may receive. That process decides the call on the run
 * (RunsApi.approve / deny / input), durably, and the tool call that asked sees the run go on in
 * its feed.
 */
import type { JSONRPCErrorResponse, JSONRPCRequest, JSONRPCResultResponse } from '@modelcontextprotocol/sdk/types.js';
import { ElicitResultSchema, RELATED_TASK_META_KEY } from '@modelcontextprotocol/sdk/types.js';
import { askUserInput } from '../../../core/index.ts';
import type { JsonValue } from '../../../model/index.ts';
import type { Runtime } from '../../../runs/index.ts';
import type { WaitingCall } from '../../../runs/lifecycle/waiting.ts';
import { StoreError, type RunRecord } from '../../../store/index.ts';
import { IllegalTransitionError } from '../../../runs/index.ts';

const PREFIX = 'keel-elicit.';

/** The JSON-RPC id of the elicitation for a run's call. */
export function elicitationId(runId: string, toolCallId: string): string {
  return PREFIX + Buffer.from(JSON.stringify([runId, toolCallId])).toString('base64url');
}

/** The run and call an elicitation's id names; undefined for any other id. */
export function elicitationRef(id: unknown): { runId: string; toolCallId: string } | undefined {
  if (typeof id !== 'string' || !id.startsWith(PREFIX)) return undefined;
  try {
    const v = JSON.parse(Buffer.from(id.slice(PREFIX.length), 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string')
      return { runId: v[0], toolCallId: v[1] };
  } catch {
    // Not one of Keel's.
  }
  return undefined;
}

const short = (v: unknown, max = 500): string => {
  const s = JSON.stringify(v) ?? 'null';
  return s.length > max ? `${s.slice(0, max)}…` : s;
};

/**
 * The elicitation that asks a waiting call: an approval is a yes/no with an optional reason; a
 * question (`ask_user`) a form with one field a question, a choice when it has choices. Undefined
 * for what a form cannot ask (a sleep, a signal, a question whose input is not ask_user's).
 */
export function elicitationRequest(
  run: RunRecord,
  call: WaitingCall,
  o: { taskId?: string } = {},
): JSONRPCRequest | undefined {
  const agent = `${run.agent.name}@${run.agent.version}`;
  let message: string;
  let requestedSchema: { type: 'object'; properties: Record<string, Record<string, unknown>>; required: string[] };
  if (call.kind === 'approval') {
    message = call.unknownOutcome
      ? `Keel agent ${agent} called ${call.toolName} ${short(call.input)}, and its outcome is unknown after an interruption. Run it again?`
      : `Keel agent ${agent} wants to call ${call.toolName} ${short(call.input)}. Approve?`;
    requestedSchema = {
      type: 'object',
      properties: {
        approve: { type: 'boolean', title: 'Approve', description: 'Yes: run the call. No: deny it.', default: true },
        reason: { type: 'string', title: 'Reason', description: 'Why it is denied (optional)' },
      },
      required: ['approve'],
    };
  } else if (call.kind === 'input') {
    const asked = askUserInput.safeParse(call.input);
    if (!asked.success) return undefined;
    const questions = asked.data.questions;
    message = `Keel agent ${agent} asks:\n${questions.map((q) => `- ${q.question}`).join('\n')}`;
    requestedSchema = {
      type: 'object',
      properties: Object.fromEntries(
        questions.map((q) => [
          q.id,
          { type: 'string', title: q.question, ...(q.choices && q.choices.length > 0 ? { enum: q.choices } : {}) },
        ]),
      ),
      required: questions.map((q) => q.id),
    };
  } else return undefined;
  return {
    jsonrpc: '2.0',
    id: elicitationId(run.id, call.toolCallId),
    method: 'elicitation/create',
    params: {
      mode: 'form',
      message,
      requestedSchema,
      ...(o.taskId !== undefined ? { _meta: { [RELATED_TASK_META_KEY]: { taskId: o.taskId } } } : {}),
    },
  };
}

/** What a client's answer did: decided the call, or left it open (a question declined, anything dismissed, an error). */
export type ElicitationOutcome = 'decided' | 'left';

/**
 * Decides the call by the client's answer: an approval accepted with `approve` is approved, with
 * `approve: false` or declined it is denied; a question accepted is answered with the form's
 * content. A dismissal (`cancel`), a declined question and an error leave the call waiting, to be
 * answered elsewhere (Keel's API, the inspector, `keel chat`). A call decided meanwhile stays as
 * it was decided.
 */
export async function applyElicitationResponse(
  rt: Runtime,
  run: RunRecord,
  call: WaitingCall,
  response: JSONRPCResultResponse | JSONRPCErrorResponse,
): Promise<ElicitationOutcome> {
  if (!('result' in response)) return 'left';
  const parsed = ElicitResultSchema.safeParse(response.result);
  if (!parsed.success) return 'left';
  const { action, content } = parsed.data;
  try {
    if (call.kind === 'approval') {
      if (action === 'cancel') return 'left';
      if (action === 'accept' && content?.approve !== false) await rt.runs.approve(run.id, call.toolCallId);
      else {
        const reason = typeof content?.reason === 'string' && content.reason !== '' ? content.reason : undefined;
        await rt.runs.deny(run.id, call.toolCallId, { reason: reason ?? 'denied in the MCP client' });
      }
      return 'decided';
    }
    if (call.kind === 'input' && action === 'accept') {
      await rt.runs.input(run.id, (content ?? {}) as JsonValue, { toolCallId: call.toolCallId });
      return 'decided';
    }
    return 'left';
  } catch (e) {
    // Someone else decided it first (another client, Keel's API, a deadline): the run goes on all the same.
    if (e instanceof IllegalTransitionError || (e instanceof StoreError && e.code === 'already_decided'))
      return 'decided';
    throw e;
  }
}
