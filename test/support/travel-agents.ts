/**
 * The travel agents of the rerun and evaluation tests: scripted versions of one agent that look a
 * city up (read-only), book it (effectful), then answer; version 1 answers "Booked <city>.",
 * version 2 "Your trip to <city> is booked.", version 3 books two seats.
 */
import { z } from 'zod';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import {
  createRuntime,
  defineAgent,
  ScriptedModel,
  tool,
  type RuntimeOptions,
  type ScriptedResponse,
  type Store,
} from '../../src/index.ts';

type Prompt = LanguageModelV4CallOptions['prompt'];

function lastUserText(prompt: Prompt): string {
  const m = prompt.findLast((x) => x.role === 'user');
  return m ? m.content.map((p) => (p.type === 'text' ? p.text : '')).join('') : '';
}

/** Tool results since the last user message. */
function resultsSinceUser(prompt: Prompt): string[] {
  const since = prompt.slice(prompt.findLastIndex((m) => m.role === 'user') + 1);
  return since.flatMap((m) =>
    m.role === 'tool' ? m.content.flatMap((p) => (p.type === 'tool-result' ? [p.toolName] : [])) : [],
  );
}

/**
 * An agent version: step 1 looks the city up, step 2 books it (`seats` when given), step 3 answers
 * with `answer(city)`.
 */
function version(v: string, answer: (city: string) => string, seats?: number, delayMs = 0) {
  const model = new ScriptedModel(
    [
      (call): ScriptedResponse => {
        const city = lastUserText(call.prompt).replace('book ', '');
        const done = resultsSinceUser(call.prompt);
        const pace = delayMs > 0 ? { chunkDelayMs: delayMs } : {};
        if (!done.includes('lookup')) return { ...pace, toolCalls: [{ id: 'l', name: 'lookup', input: { city } }] };
        if (!done.includes('book')) {
          const input: Record<string, string | number> = seats ? { city, seats } : { city };
          return { ...pace, toolCalls: [{ id: 'b', name: 'book', input }] };
        }
        return { ...pace, text: answer(city) };
      },
    ],
    { loop: true, modelId: `travel-${v}` },
  );
  return model;
}

/** A runtime with the travel agents and (unless `worker: false`) a worker; `delayMs` paces their models. */
export function travelRuntime(
  store: Store,
  more: Partial<RuntimeOptions> = {},
  o: { worker?: boolean; delayMs?: number } = {},
) {
  const executed = { lookup: 0, book: 0 };
  const tools = [
    tool({
      name: 'lookup',
      description: 'Finds a city',
      input: z.object({ city: z.string() }),
      effect: 'read-only',
      execute: ({ city }) => {
        executed.lookup++;
        return { city, found: true };
      },
    }),
    tool({
      name: 'book',
      description: 'Books a trip (effectful)',
      input: z.object({ city: z.string(), seats: z.number().optional() }),
      execute: ({ city, seats }) => {
        executed.book++;
        return { booked: city, seats: seats ?? 1, ref: `R${executed.book}` };
      },
    }),
  ];
  const system = 'You book trips.';
  const agents = [
    defineAgent({
      name: 'travel',
      version: '1',
      model: version('1', (c) => `Booked ${c}.`, undefined, o.delayMs),
      system,
      tools,
    }),
    defineAgent({
      name: 'travel',
      version: '2',
      model: version('2', (c) => `Your trip to ${c} is booked.`, undefined, o.delayMs),
      system,
      tools,
    }),
    defineAgent({
      name: 'travel',
      version: '3',
      model: version('3', (c) => `Booked ${c} for two.`, 2, o.delayMs),
      system,
      tools,
    }),
  ];
  const rt = createRuntime({ store, agents, ...more });
  if (o.worker !== false) rt.startWorker({ id: 'W', pollMs: 10 });
  return { rt, executed };
}
