import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  BLOB_MIN_BYTES,
  blobHash,
  contextProjection,
  defineAgent,
  newId,
  openSqliteStore,
  readProjection,
  ScriptedModel,
  Sessions,
  tool,
  type NewEvent,
  type SessionEvent,
  type Store,
} from '../../src/index.ts';

const SYSTEM = `You are a meticulous assistant. ${'Follow every rule below to the letter, and explain your reasoning briefly. '.repeat(20)}`;

const toolResult = (
  output: { type: 'text'; value: string } | { type: 'json'; value: never },
  toolCallId = 'c1',
): NewEvent => ({
  type: 'tool/result',
  data: { toolCallId, toolName: 'fetch', output, toolMessageId: `tm-${toolCallId}`, durationMs: 3 },
});

describe('blobs', () => {
  let dir: string;
  let path: string;
  let store: Store;
  let sessions: Sessions;

  const blobRows = (): Array<{ hash: string; data: string; size: number }> => {
    const raw = new Database(path, { readonly: true });
    try {
      return raw.prepare('SELECT hash, data, size FROM blobs ORDER BY hash').all() as Array<{
        hash: string;
        data: string;
        size: number;
      }>;
    } finally {
      raw.close();
    }
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-blobs-'));
    path = join(dir, 'keel.db');
    store = openSqliteStore({ path, synchronous: 'OFF' });
    sessions = new Sessions({ store });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('stores a large system prompt once across many requests, each header referring to it by hash', async () => {
    expect(Buffer.byteLength(JSON.stringify(SYSTEM))).toBeGreaterThan(BLOB_MIN_BYTES);
    const echo = tool({
      name: 'echo',
      description: 'echoes',
      input: z.object({ v: z.string() }),
      execute: ({ v }) => v,
    });
    const model = new ScriptedModel([
      { toolCalls: [{ name: 'echo', input: { v: 'one' } }] },
      { text: 'first answer' },
      { text: 'second answer' },
      { toolCalls: [{ name: 'echo', input: { v: 'two' } }] },
      { text: 'third answer' },
    ]);
    const agent = defineAgent({ name: 'big-prompt', model, system: SYSTEM, tools: [echo] });
    const s = await sessions.create();
    for (const input of ['a', 'b', 'c']) {
      const result = await (await sessions.startTurn(s.id, agent, { input })).result;
      expect(result.reason).toBe('completed');
    }
    expect(model.calls).toHaveLength(5);

    // One row in the blob table, holding exactly the prompt.
    const systemHash = blobHash(JSON.stringify(SYSTEM));
    const rows = blobRows();
    expect(rows.map((r) => r.hash)).toContain(systemHash);
    expect(rows.filter((r) => r.data.includes('meticulous'))).toHaveLength(1);
    expect(JSON.parse(rows.find((r) => r.hash === systemHash)!.data)).toBe(SYSTEM);
    expect((await store.events.getBlobs([systemHash])).get(systemHash)).toBe(JSON.stringify(SYSTEM));

    // Every header refers to it by content hash, stored and read back alike: a header is small
    // whatever the prompt's size, and the text is read only by who needs it (the replay check).
    const stored = (await store.events.read(s.id)).filter((e) => e.type === 'request/header');
    expect(stored).toHaveLength(5);
    for (const e of stored) expect((e.data as { system: unknown }).system).toBe(systemHash);
    const headers = (await sessions.events(s.id)).filter(
      (e): e is SessionEvent<'request/header'> => e.type === 'request/header',
    );
    expect(headers).toHaveLength(5);
    for (const h of headers) expect(h.data.system).toBe(systemHash);
    const dev = await sessions.developerView(s.id);
    const requests = dev.turns.flatMap((t) => t.steps.flatMap((x) => x.requests));
    expect(requests).toHaveLength(5);
    for (const r of requests) expect(r.system).toBe(systemHash);
    expect(await sessions.verifyReplay(s.id)).toMatchObject({ ok: true, requests: 5 });
  });

  it('leaves small payloads inline', async () => {
    const s = await sessions.create();
    await sessions.append(s.id, [toolResult({ type: 'text', value: 'short' })]);
    expect(blobRows()).toEqual([]);
    expect((await store.events.read(s.id)).at(-1)!.data).toMatchObject({ output: { type: 'text', value: 'short' } });
  });

  it('stores a large tool output as a blob and reads it back intact', async () => {
    const big = Array.from({ length: 300 }, (_, i) => `line ${i}: ${'é€😀'.repeat(i % 7)} "quoted" \\ back\n`).join('');
    const grep = tool({ name: 'grep', description: 'searches', input: z.object({}), execute: () => big });
    const model = new ScriptedModel([{ toolCalls: [{ id: 'call-1', name: 'grep', input: {} }] }, { text: 'found it' }]);
    const s = await sessions.create();
    const result = await (
      await sessions.startTurn(s.id, defineAgent({ name: 'g', model, tools: [grep] }), { input: 'search' })
    ).result;
    expect(result.reason).toBe('completed');

    const expectedOutput = { type: 'text', value: big };
    const hash = blobHash(JSON.stringify(expectedOutput));
    // The tool output, and the tool schemas the requests referred to.
    const rows = blobRows();
    expect(rows.map((r) => r.hash).sort()).toEqual([hash, blobHash(JSON.stringify([grep.schema]))].sort());
    expect(rows.find((r) => r.hash === hash)!.size).toBe(Buffer.byteLength(JSON.stringify(expectedOutput)));

    const storedResult = (await store.events.read(s.id)).find((e) => e.type === 'tool/result')!;
    expect(storedResult.data).toMatchObject({ toolCallId: 'call-1', output: { $blob: hash } });
    const readBack = (await sessions.events(s.id)).find(
      (e): e is SessionEvent<'tool/result'> => e.type === 'tool/result',
    )!;
    expect(readBack.data.output).toEqual(expectedOutput);

    // The context the next turn sends carries the full output, and so did the second model call.
    const ctx = await sessions.context(s.id);
    const toolMsg = ctx.messages.find((m) => m.role === 'tool');
    expect(toolMsg?.role === 'tool' && toolMsg.content[0]!.output).toEqual(expectedOutput);
    expect(JSON.stringify(model.calls[1]!.prompt)).toContain(JSON.stringify(big).slice(1, 200));
  });

  it('shares one blob row between sessions with identical payloads', async () => {
    const agentFor = () => defineAgent({ name: 'same', model: new ScriptedModel([{ text: 'ok' }]), system: SYSTEM });
    const s1 = await sessions.create();
    const s2 = await sessions.create();
    await (
      await sessions.startTurn(s1.id, agentFor(), { input: 'one' })
    ).result;
    await (
      await sessions.startTurn(s2.id, agentFor(), { input: 'two' })
    ).result;
    const big = 'z'.repeat(2000);
    await sessions.append(s1.id, [toolResult({ type: 'text', value: big })]);
    await sessions.append(s2.id, [toolResult({ type: 'text', value: big }, 'c2')]);

    const rows = blobRows();
    expect(rows.map((r) => r.hash).sort()).toEqual(
      [blobHash(JSON.stringify(SYSTEM)), blobHash(JSON.stringify({ type: 'text', value: big }))].sort(),
    );
    for (const id of [s1.id, s2.id]) {
      const events = await sessions.events(id);
      expect(events.find((e): e is SessionEvent<'request/header'> => e.type === 'request/header')!.data.system).toBe(
        blobHash(JSON.stringify(SYSTEM)),
      );
      expect(events.find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result')!.data.output).toEqual({
        type: 'text',
        value: big,
      });
    }
  });

  describe('values that look like blob references', () => {
    const lookalike = { $blob: 'sha256:0000000000000000000000000000000000000000000000000000000000000000' };

    it('round-trips a top-level data value shaped like a reference unchanged', async () => {
      const s = await sessions.create({ metadata: lookalike });
      const [call, decision] = await sessions.append(s.id, [
        {
          type: 'tool/call',
          data: {
            toolCallId: 'c1',
            toolName: 'store',
            input: lookalike,
            idempotencyKey: 'k',
            assistantMessageId: 'a1',
          },
        },
        {
          type: 'tool/decision',
          data: { toolCallId: 'c1', approved: true, editedInput: { $blob: 'not even a hash' } },
        },
      ]);
      expect(call!.data).toMatchObject({ input: lookalike });
      expect(decision!.data).toMatchObject({ editedInput: { $blob: 'not even a hash' } });

      const events = await sessions.events(s.id);
      expect(events[0]!.data).toMatchObject({ metadata: lookalike });
      expect(events[1]!.data).toEqual({
        toolCallId: 'c1',
        toolName: 'store',
        input: lookalike,
        idempotencyKey: 'k',
        assistantMessageId: 'a1',
      });
      expect(events[2]!.data).toEqual({ toolCallId: 'c1', approved: true, editedInput: { $blob: 'not even a hash' } });
      expect((await sessions.developerView(s.id)).session[0]!.data).toMatchObject({ metadata: lookalike });

      // Stored wrapped in a blob of its own, so a reader can tell it from a real reference.
      const stored = await store.events.read(s.id);
      const ref = (stored[1]!.data as { input: { $blob: string } }).input;
      expect(ref.$blob).toBe(blobHash(JSON.stringify(lookalike)));
      expect(JSON.parse((await store.events.getBlobs([ref.$blob])).get(ref.$blob)!)).toEqual(lookalike);
    });

    it('never swaps a lookalike for the stored blob it happens to name', async () => {
      const s = await sessions.create();
      const big = 'secret '.repeat(200);
      await sessions.append(s.id, [toolResult({ type: 'text', value: big })]);
      const existing = { $blob: blobHash(JSON.stringify({ type: 'text', value: big })) };
      expect(blobRows().map((r) => r.hash)).toEqual([existing.$blob]);

      await sessions.append(s.id, [
        {
          type: 'tool/call',
          data: { toolCallId: 'c9', toolName: 'x', input: existing, idempotencyKey: 'k', assistantMessageId: 'a' },
        },
      ]);
      const read = (await sessions.events(s.id)).at(-1)!;
      expect(read.data).toMatchObject({ input: existing });
    });

    it('round-trips lookalikes nested inside a blob field, large or small', async () => {
      const s = await sessions.create();
      const small = { type: 'json', value: { $blob: 'sha256:abc' } } as const;
      const large = { type: 'json', value: { $blob: 'sha256:abc', pad: 'p'.repeat(1000) } } as const;
      await sessions.append(s.id, [toolResult(small as never, 'c1'), toolResult(large as never, 'c2')]);
      const results = (await sessions.events(s.id)).filter(
        (e): e is SessionEvent<'tool/result'> => e.type === 'tool/result',
      );
      expect(results.map((e) => e.data.output)).toEqual([small, large]);
      const ctx = await readProjection(sessions.log, s.id, contextProjection, 1);
      expect(ctx.state.messages.flatMap((m) => (m.role === 'tool' ? m.content.map((p) => p.output) : []))).toEqual([
        small,
        large,
      ]);
    });
  });

  it('reads events written with a blob whose row is missing as an error, not as the reference', async () => {
    const s = await sessions.create();
    await store.events.append(s.id, [
      {
        id: newId(),
        type: 'tool/result',
        v: 1,
        time: Date.now(),
        entry: true,
        data: {
          toolCallId: 'c',
          toolName: 't',
          output: { $blob: 'sha256:missing' },
          toolMessageId: 'tm',
          durationMs: 0,
        },
      },
    ]);
    await expect(sessions.events(s.id)).rejects.toMatchObject({ code: 'missing_blob' });
  });
});
