/**
 * Large payloads (issue 42, ADR-0040), on both backends through the runtime: a 1 MB tool result is
 * stored once by hash (two sessions with the same content share it) and referenced from the log
 * with its size and media type; the transcript and the events return it whole; the model sees the
 * policy's view (its first bytes and the reference, or all of it), and the replay check agrees; an
 * event too large is refused before the store; export and import carry the blobs; erasure removes
 * a blob once no session refers to it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  contentHash,
  createRuntime,
  defineAgent,
  EventTooLargeError,
  ScriptedModel,
  tool,
  type BlobStore,
  type LargePayloadOptions,
  type NewBlob,
  type Runtime,
  type Store,
  type ToolOutput,
} from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';
import { exportText } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A 1 MB text, different per seed: a log file a tool read. */
const bigText = (seed: string, bytes = 1 << 20): string => {
  const line = `${seed} 2026-12-05T11:00:00Z INFO request served in 12 ms, status 200, path /api/items\n`;
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
};

async function runtimeOn(
  backend: 'sqlite' | 'postgres',
  largePayloads?: LargePayloadOptions,
  content: (seed: string) => string = bigText,
): Promise<{ rt: Runtime; store: Store; model: ScriptedModel }> {
  const { store, close } = await openBackendStore(backend);
  cleanups.push(close);
  const readLog = tool({
    name: 'read_log',
    description: 'Reads a log file',
    input: z.object({ seed: z.string() }),
    execute: ({ seed }) => content(seed),
  });
  const model = new ScriptedModel([{ toolCalls: [{ name: 'read_log', input: { seed: 'web-1' } }] }, { text: 'done' }], {
    loop: true,
  });
  const rt = createRuntime({
    store,
    agents: [defineAgent({ name: 'a', model, tools: [readLog] })],
    ...(largePayloads ? { largePayloads } : {}),
  });
  cleanups.push(() => rt.close({ graceMs: 50 }));
  rt.startWorker({ pollMs: 10, sweepMs: 10 });
  return { rt, store, model };
}

async function sessionWithBigResult(rt: Runtime): Promise<string> {
  const s = await rt.sessions.create();
  const { run } = await rt.sessions.send(s.id, 'read the log');
  expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
  return s.id;
}

/** The tool result's output as stored in the event row (the port's raw read, not decoded). */
async function storedOutput(store: Store, sessionId: string): Promise<{ type: string; value: unknown }> {
  const raw = await store.events.read(sessionId);
  const e = raw.find((x) => x.type === 'tool/result')!;
  return (e.data as { output: { type: string; value: unknown } }).output;
}

/** The text of the tool result a model call's prompt carried. */
function promptToolResult(model: ScriptedModel, call: number): string {
  const prompt = model.calls[call]!.prompt;
  for (const m of prompt)
    if (m.role === 'tool')
      for (const p of m.content)
        if (p.type === 'tool-result') {
          const o = p.output as { type: string; value: unknown };
          return typeof o.value === 'string' ? o.value : JSON.stringify(o.value);
        }
  throw new Error(`call ${call} carried no tool result`);
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`large payloads (${backend})`, () => {
    it(
      'a 1 MB tool result is stored once by hash, shared by two sessions, returned whole, shown truncated to the model',
      { timeout: 60_000 },
      async () => {
        const { rt, store, model } = await runtimeOn(backend);
        const a = await sessionWithBigResult(rt);
        const b = await sessionWithBigResult(rt);
        const text = bigText('web-1');
        const hash = contentHash(text);

        // The event row holds the reference, with the size and media type.
        const ref = { $blob: hash, size: 1 << 20, mediaType: 'text/plain; charset=utf-8' };
        expect(await storedOutput(store, a)).toEqual({ type: 'text', value: ref });
        expect(await storedOutput(store, b)).toEqual({ type: 'text', value: ref });
        const raw = await store.events.read(a);
        expect(JSON.stringify(raw).length).toBeLessThan(64 * 1024);
        // One blob for both sessions (content-addressed), known by its size and media type.
        expect(await store.events.blobInfo([hash])).toEqual(
          new Map([[hash, { hash, size: 1 << 20, mediaType: 'text/plain; charset=utf-8', encoding: null }]]),
        );
        expect(await store.events.blobTenant(hash, 'default')).toBe(true);
        expect(await store.events.blobTenant(hash, 'someone-else')).toBe(false);

        // The events and the developer view give it whole.
        const events = await rt.sessions.events(a);
        const result = events.find((e) => e.type === 'tool/result')!;
        expect((result.data as { output: ToolOutput }).output).toEqual({ type: 'text', value: text });
        expect(JSON.stringify(await rt.sessions.developerView(a))).toContain(JSON.stringify(text));

        // The model saw its first 32 KiB and the reference, during the run (the second call of
        // each session's run) and in the context rebuilt from the log.
        const seen = promptToolResult(model, 1);
        expect(seen.startsWith(text.slice(0, 32 * 1024))).toBe(true);
        expect(seen).toContain(`[truncated by Keel: the first ${32 * 1024} of ${1 << 20} bytes`);
        expect(seen).toContain(`the whole result is blob ${hash}]`);
        expect(promptToolResult(model, 3)).toBe(seen);
        const ctx = await rt.sessions.context(a);
        const tm = ctx.messages.find((m) => m.role === 'tool')!;
        expect(tm.content[0]!.output).toEqual({ type: 'text', value: seen });
        // The replay check rebuilds what the model was sent: the same view.
        const report = await rt.sessions.verifyReplay(a);
        expect(report.mismatches).toEqual([]);
        expect(report.requests).toBe(2);

        // Erasing one session leaves the blob to the other; erasing both removes it.
        await rt.sessions.erase(a);
        expect((await store.events.blobInfo([hash])).size).toBe(1);
        expect((await rt.sessions.events(b)).find((e) => e.type === 'tool/result')!.data).toMatchObject({
          output: { value: text },
        });
        expect(await store.events.blobHead(hash, 10)).toBe(text.slice(0, 10));
        await rt.sessions.erase(b);
        expect((await store.events.blobInfo([hash])).size).toBe(0);
        // Its kept head too.
        expect(await store.events.blobHead(hash, 10)).toBeUndefined();
      },
    );

    it(
      'with modelView whole, the model sees all of it; below the threshold nothing moves',
      { timeout: 60_000 },
      async () => {
        const { rt, store, model } = await runtimeOn(backend, { modelView: 'whole', thresholdBytes: 512 * 1024 });
        const a = await sessionWithBigResult(rt);
        const text = bigText('web-1');
        expect(promptToolResult(model, 1)).toBe(text);
        expect((await storedOutput(store, a)).value).toMatchObject({ $blob: contentHash(text) });
        const ctx = await rt.sessions.context(a);
        expect(ctx.messages.find((m) => m.role === 'tool')!.content[0]!.output).toEqual({ type: 'text', value: text });
        expect((await rt.sessions.verifyReplay(a)).mismatches).toEqual([]);

        // A message below the threshold stays in its event (as a small blob of its field, as ever).
        const s = await rt.sessions.create();
        const small = 'x'.repeat(100 * 1024);
        await rt.sessions.appendUserMessage(s.id, small);
        expect(JSON.stringify(await store.events.read(s.id))).not.toContain('"mediaType"');
        expect((await rt.sessions.events(s.id)).at(-1)!.data).toMatchObject({
          message: { content: [{ text: small }] },
        });
      },
    );

    it('a small JSON result that looks like a large reference is stored apart too, and read back as it was', async () => {
      const { rt, store } = await runtimeOn(backend);
      const s = await rt.sessions.create();
      const lookalike = { $blob: `sha256:${'0'.repeat(64)}`, size: 3, mediaType: 'text/plain' };
      await rt.sessions.append(s.id, [
        {
          type: 'tool/result',
          data: {
            toolCallId: 'c1',
            toolName: 'echo',
            output: { type: 'json', value: lookalike },
            toolMessageId: 'tm1',
            durationMs: 1,
          },
        },
      ]);
      const stored = await storedOutput(store, s.id);
      expect(stored.value).toEqual({
        $blob: contentHash(JSON.stringify(lookalike)),
        size: Buffer.byteLength(JSON.stringify(lookalike)),
        mediaType: 'application/json',
      });
      expect((await rt.sessions.events(s.id)).at(-1)!.data).toMatchObject({
        output: { type: 'json', value: lookalike },
      });
      // Under the threshold, the model sees it whole, as the loop would show it.
      const ctx = await rt.sessions.context(s.id);
      expect(ctx.messages.at(-1)).toMatchObject({ content: [{ output: { type: 'json', value: lookalike } }] });
    });

    it('a large message text and attachment are stored apart and read back whole', { timeout: 60_000 }, async () => {
      const { rt, store } = await runtimeOn(backend);
      const s = await rt.sessions.create();
      const text = bigText('note', 300 * 1024);
      const file = Buffer.alloc(400 * 1024, 7);
      file.write('PNG-ish header', 0);
      const data = file.toString('base64');
      await rt.sessions.appendUserMessage(s.id, [
        { type: 'text', text },
        { type: 'file', mediaType: 'image/png', data, filename: 'shot.png' },
      ]);
      const rawRow = JSON.stringify((await store.events.read(s.id)).at(-1)!.data);
      expect(rawRow.length).toBeLessThan(2000);
      expect(rawRow).toContain(`"$blob":"${contentHash(text)}"`);
      const fileHash = contentHash(data);
      expect(JSON.parse(rawRow).message.content[1]).toEqual({
        type: 'file',
        mediaType: 'image/png',
        filename: 'shot.png',
        data: { $blob: fileHash, size: file.length, mediaType: 'image/png', encoding: 'base64' },
      });
      expect((await store.events.blobInfo([fileHash])).get(fileHash)).toMatchObject({
        mediaType: 'image/png',
        encoding: 'base64',
      });
      const back = (await rt.sessions.events(s.id)).at(-1)!;
      expect(back.data).toMatchObject({
        message: {
          content: [
            { type: 'text', text },
            { type: 'file', data, filename: 'shot.png' },
          ],
        },
      });
      // What the model gets of the message is the message (attachments are not truncated).
      const ctx = await rt.sessions.context(s.id);
      expect(ctx.messages.at(-1)).toMatchObject({ content: [{ text }, { data }] });
    });

    it('a view cut between characters: at most truncateTo bytes, whole characters, the same in the run and the log', async () => {
      const mixed = (seed: string) => `${seed}:${'ab€😀'.repeat(2000)}`;
      const { rt, model } = await runtimeOn(backend, { thresholdBytes: 1024, modelView: { truncateTo: 1001 } }, mixed);
      const a = await sessionWithBigResult(rt);
      const seen = promptToolResult(model, 1);
      const [shown] = seen.split('\n\n[truncated by Keel');
      expect(Buffer.byteLength(shown!)).toBeLessThanOrEqual(1001);
      expect(Buffer.byteLength(shown!)).toBeGreaterThan(1001 - 4);
      expect(shown).not.toContain('\ufffd');
      expect(mixed('web-1').startsWith(shown!)).toBe(true);
      expect(seen).toContain(`of ${Buffer.byteLength(mixed('web-1'))} bytes`);
      const ctx = await rt.sessions.context(a);
      expect(ctx.messages.find((m) => m.role === 'tool')!.content[0]!.output).toEqual({ type: 'text', value: seen });
      expect((await rt.sessions.verifyReplay(a)).mismatches).toEqual([]);
    });

    it('large payloads go to the blob store configured instead of the database (the archive seam)', async () => {
      const held = new Map<string, NewBlob>();
      const archive: BlobStore = {
        kind: 'test-archive',
        put: async (blobs) => void blobs.forEach((b) => held.set(b.hash, b)),
        get: async (hashes) => new Map(hashes.filter((h) => held.has(h)).map((h) => [h, held.get(h)!.data])),
        info: async (hashes) =>
          new Map(
            hashes
              .filter((h) => held.has(h))
              .map((h) => {
                const b = held.get(h)!;
                return [
                  h,
                  { hash: h, size: Buffer.byteLength(b.data), mediaType: b.mediaType ?? null, encoding: null },
                ];
              }),
          ),
        head: async (hash, chars) => held.get(hash)?.data.slice(0, chars),
      };
      const { rt, store, model } = await runtimeOn(backend, { store: archive });
      const a = await sessionWithBigResult(rt);
      const text = bigText('web-1');
      const hash = contentHash(text);
      expect(held.get(hash)).toMatchObject({ data: text, mediaType: 'text/plain; charset=utf-8' });
      expect((await store.events.blobInfo([hash])).size).toBe(0);
      expect(await store.events.blobTenant(hash, 'default')).toBe(true);
      expect((await rt.sessions.events(a)).find((e) => e.type === 'tool/result')!.data).toMatchObject({
        output: { value: text },
      });
      expect(promptToolResult(model, 1)).toContain(`the whole result is blob ${hash}]`);
      expect((await rt.sessions.verifyReplay(a)).mismatches).toEqual([]);
      // An export reads them there; an import writes them to the database, which is read behind the store.
      const exported = await exportText(rt.sessions, a);
      held.clear();
      const imported = await rt.sessions.import(exported);
      expect((await rt.sessions.events(imported.id)).find((e) => e.type === 'tool/result')!.data).toMatchObject({
        output: { value: text },
      });
      expect((await rt.sessions.context(imported.id)).messages.find((m) => m.role === 'tool')).toBeDefined();
    });

    it('an event too large once its payloads are apart is refused before the store, which keeps nothing', async () => {
      const { rt, store } = await runtimeOn(backend, { maxPayloadBytes: 2 << 20 });
      const s = await rt.sessions.create();
      const before = (await store.sessions.get(s.id))!.lastSeq;
      // 40 parts of 250 KB, each under the threshold: 10 MB in one event.
      const parts = Array.from({ length: 40 }, (_, i) => ({ type: 'text' as const, text: bigText(`p${i}`, 250_000) }));
      const refused = await rt.sessions.appendUserMessage(s.id, parts).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(EventTooLargeError);
      expect(refused).toMatchObject({ code: 'event_too_large', limit: 8 << 20 });
      expect((refused as Error).message).toMatch(/user\/message event of \d+ bytes .* over the limit of 8388608 bytes/);
      // One payload over maxPayloadBytes.
      const tooBig = await rt.sessions.appendUserMessage(s.id, bigText('big', 3 << 20)).catch((e: unknown) => e);
      expect(tooBig).toBeInstanceOf(EventTooLargeError);
      expect((tooBig as Error).message).toContain('a payload of 3145728 bytes, over the limit of 2097152 bytes');
      expect((await store.sessions.get(s.id))!.lastSeq).toBe(before);
      expect((await store.events.blobInfo([contentHash(bigText('big', 3 << 20))])).size).toBe(0);
    });

    it('a tool result over the payload bound is recorded as an error the model sees, not refused', async () => {
      const { rt, store, model } = await runtimeOn(backend, { maxPayloadBytes: 512 * 1024 });
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'read the log');
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
      const message = `the tool's result of ${1 << 20} bytes is over the limit of 524288 bytes: it was not recorded`;
      const result = (await rt.sessions.events(s.id)).find((e) => e.type === 'tool/result')!;
      expect((result.data as { output: ToolOutput }).output).toEqual({
        type: 'error',
        code: 'execution_error',
        message,
      });
      expect(promptToolResult(model, 1)).toContain(message);
      expect((await store.events.blobInfo([contentHash(bigText('web-1'))])).size).toBe(0);
      expect((await rt.sessions.verifyReplay(s.id)).mismatches).toEqual([]);
    });

    it(
      'export and import carry a session with large payloads, their media types included',
      { timeout: 60_000 },
      async () => {
        const { rt, store } = await runtimeOn(backend);
        const a = await sessionWithBigResult(rt);
        const data = Buffer.alloc(300 * 1024, 1).toString('base64');
        await rt.sessions.appendUserMessage(a, [{ type: 'file', mediaType: 'application/pdf', data }]);
        const text = await exportText(rt.sessions, a);
        expect(text).toContain('"mediaType":"text/plain; charset=utf-8"');
        expect(text).toContain('"mediaType":"application/pdf","encoding":"base64"');

        // Imported into another store: the same events, the blobs with their types.
        const other = await openBackendStore(backend);
        cleanups.push(other.close);
        const rt2 = createRuntime({
          store: other.store,
          agents: [defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'x' }]) })],
        });
        cleanups.push(() => rt2.close({ graceMs: 50 }));
        const imported = await rt2.sessions.import(text, { ids: 'keep' });
        const strip = (es: Awaited<ReturnType<Runtime['sessions']['events']>>) =>
          es.map(({ sessionId: _s, ...rest }) => rest);
        expect(strip(await rt2.sessions.events(imported.id))).toEqual(strip(await rt.sessions.events(a)));
        expect(await other.store.events.read(imported.id)).toEqual(await store.events.read(a));
        const fileHash = contentHash(data);
        expect((await other.store.events.blobInfo([fileHash])).get(fileHash)).toMatchObject({
          mediaType: 'application/pdf',
          encoding: 'base64',
        });
        expect((await rt2.sessions.verifyReplay(imported.id)).mismatches).toEqual([]);

        // An export whose large blob line is missing is refused, naming the line.
        const lines = text.split('\n').filter((l) => !l.includes(`"hash":"${contentHash(bigText('web-1'))}"`));
        await expect(rt2.sessions.import(lines.join('\n'))).rejects.toThrow(/refers to blob sha256:/);
      },
    );
  });
}

describe('large payloads: settings', () => {
  it('a bad setting is refused when the runtime is made, naming it', async () => {
    const { store, close } = await openBackendStore('sqlite');
    cleanups.push(close);
    const agents = [defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'x' }]) })];
    expect(() => createRuntime({ store, agents, largePayloads: { thresholdBytes: 0 } })).toThrow(
      'largePayloads.thresholdBytes must be a positive integer',
    );
    expect(() => createRuntime({ store, agents, largePayloads: { modelView: { truncateTo: 1.5 } } })).toThrow(
      'largePayloads.modelView.truncateTo must be a positive integer',
    );
  });
});
