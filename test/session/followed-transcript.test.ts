import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  readProjection,
  ScriptedModel,
  tool,
  transcriptProjection,
  type Runtime,
  type SqliteStore,
} from '../../src/index.ts';
import { tempDbPath } from '../support/session-helpers.ts';

/**
 * The transcript a process reads of sessions it created and ran is kept up to date by its own
 * commits (FollowedProjections): it must always equal what another process, which kept nothing,
 * rebuilds from the log, whatever happened in between (other processes' appends, branch moves,
 * transactions that rolled back).
 */
const opened: Array<{ rt: Runtime; store: SqliteStore }> = [];
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) {
    await o.rt.close();
    await o.store.close();
  }
  for (const c of cleanups.splice(0)) c();
});

const inc = tool({
  name: 'inc',
  description: 'increments',
  input: z.object({ n: z.number() }),
  idempotent: true,
  execute: ({ n }) => n + 1,
});

/** A runtime on the file, with a worker: two tool steps and an answer a run. */
function open(path: string, o: { worker?: boolean } = {}) {
  const store = openSqliteStore({ path });
  const model = new ScriptedModel(
    [
      { text: 'one', toolCalls: [{ name: 'inc', input: { n: 1 } }] },
      { text: 'two', toolCalls: [{ name: 'inc', input: { n: 2 } }] },
      { text: 'done' },
    ],
    { loop: true },
  );
  const rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model, tools: [inc] })] });
  if (o.worker !== false) rt.startWorker({ pollMs: 50 });
  opened.push({ rt, store });
  return rt;
}

function file() {
  const t = tempDbPath();
  cleanups.push(t.cleanup);
  return t.path;
}

async function run(rt: Runtime, sessionId: string, text: string) {
  const { run } = await rt.sessions.send(sessionId, text);
  const done = await rt.runs.wait(run.id);
  expect(done.status).toBe('completed');
}

/** What a process that kept nothing reads: a runtime of its own on the same file, without a worker. */
async function coldTranscript(path: string, sessionId: string) {
  const cold = open(path, { worker: false });
  return cold.sessions.transcript(sessionId);
}

describe('the transcript followed by the process that commits', () => {
  it('after runs executed here equals a rebuild from the log', async () => {
    const path = file();
    const rt = open(path);
    const s = await rt.sessions.create();
    await run(rt, s.id, 'first');
    await run(rt, s.id, 'second');
    const mine = await rt.sessions.transcript(s.id);
    expect(mine.map((i) => (i.kind === 'user' || i.kind === 'assistant' ? `${i.kind}:${i.text}` : i.kind))).toEqual([
      'user:first',
      'assistant:one',
      'assistant:two',
      'assistant:done',
      'user:second',
      'assistant:one',
      'assistant:two',
      'assistant:done',
    ]);
    expect(mine.flatMap((i) => (i.kind === 'assistant' ? i.tools.map((t) => t.status) : []))).toEqual([
      'ok',
      'ok',
      'ok',
      'ok',
    ]);
    expect(await coldTranscript(path, s.id)).toEqual(mine);
    // Read as of the last seq, folding nothing: no log read.
    const read = await readProjection(rt.sessions.log, s.id, transcriptProjection, rt.sessions.snapshotEvery);
    expect(read.folded).toBe(0);
    expect(read.asOfSeq).toBe((await rt.sessions.get(s.id)).lastSeq);
  });

  it('sees what another process appended, and what a branch move changed', async () => {
    const path = file();
    const rt = open(path);
    const other = open(path, { worker: false });
    const s = await rt.sessions.create();
    await run(rt, s.id, 'first');
    // Another process's commit: this process's state does not follow it, its read folds the tail.
    await other.sessions.appendUserMessage(s.id, 'from elsewhere');
    const afterOther = await rt.sessions.transcript(s.id);
    expect(afterOther.at(-1)).toMatchObject({ kind: 'user', text: 'from elsewhere' });
    expect(afterOther).toEqual(await coldTranscript(path, s.id));
    // This process's commits are followed again from the state its read left.
    await run(rt, s.id, 'second');
    expect(await rt.sessions.transcript(s.id)).toEqual(await coldTranscript(path, s.id));

    // Back to the first answer, then a run on that branch: the path changed under the state.
    const first = (await rt.sessions.transcript(s.id)).find((i) => i.kind === 'assistant' && i.text === 'done')!;
    await rt.sessions.switchBranch(s.id, first.entryId);
    await run(rt, s.id, 'on the branch');
    const branched = await rt.sessions.transcript(s.id);
    expect(branched.filter((i) => i.kind === 'user').map((i) => (i.kind === 'user' ? i.text : ''))).toEqual([
      'first',
      'on the branch',
    ]);
    expect(branched).toEqual(await coldTranscript(path, s.id));

    // A fork into a new session: its creation and its copy of the path commit together.
    const fork = await rt.sessions.fork(s.id, first.entryId, { into: 'session' });
    await run(rt, fork.sessionId, 'in the fork');
    const forked = await rt.sessions.transcript(fork.sessionId);
    expect(forked.filter((i) => i.kind === 'user').map((i) => (i.kind === 'user' ? i.text : ''))).toEqual([
      'first',
      'in the fork',
    ]);
    expect(forked).toEqual(await coldTranscript(path, fork.sessionId));
  });

  it('leaves out what a transaction that rolled back appended, and what the caller changed in a read', async () => {
    const path = file();
    const rt = open(path);
    const s = await rt.sessions.create();
    await run(rt, s.id, 'kept');
    const log = rt.sessions.log;
    await expect(
      log.transaction(async (tx) => {
        await log.append(
          s.id,
          [
            {
              type: 'user/message',
              data: {
                message: { id: 'gone', role: 'user', content: [{ type: 'text', text: 'rolled back' }] },
                via: 'input',
              },
            },
          ],
          { tx },
        );
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    const read = await rt.sessions.transcript(s.id);
    expect(read.some((i) => i.kind === 'user' && i.text === 'rolled back')).toBe(false);
    // A read's items are the caller's: changing them changes nothing kept.
    const item = read.find((i) => i.kind === 'assistant')!;
    if (item.kind === 'assistant') {
      item.text = 'changed';
      item.tools[0]!.status = 'error';
    }
    read.push({ kind: 'branch', entryId: 'x', summary: 'x', time: 0 });
    await run(rt, s.id, 'next');
    expect(await rt.sessions.transcript(s.id)).toEqual(await coldTranscript(path, s.id));
  });
});
