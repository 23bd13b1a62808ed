import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { z } from 'zod';
import { askUser, defineAgent, newId, tool, type AgentDefinition } from '../core/index.ts';
import { ScriptedModel, type ScriptedResponse } from '../model/index.ts';

const WEATHER: Record<string, number> = { paris: 18, tokyo: 24, berlin: 15, london: 14, 'new york': 21 };

function lastUserText(call: LanguageModelV4CallOptions): string {
  for (let i = call.prompt.length - 1; i >= 0; i--) {
    const m = call.prompt[i]!;
    if (m.role === 'user') return m.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
  }
  return '';
}

/**
 * What the demo model says next, decided from the conversation so far: look up the weather,
 * send a report (which needs approval), ask the user a question, then answer (version 2 answers
 * more briefly, in the form its system prompt asks for).
 */
function nextResponse(call: LanguageModelV4CallOptions, version: DemoVersion): ScriptedResponse {
  const sinceUser = call.prompt.slice(
    call.prompt.findLastIndex(
      (m) => m.role === 'user' && m.content.some((p) => p.type === 'text' && !p.text.startsWith('<summary')),
    ) + 1,
  );
  const results = sinceUser.flatMap((m) =>
    m.role === 'tool' ? m.content.filter((p) => p.type === 'tool-result') : [],
  );
  const has = (name: string) => results.find((r) => r.toolName === name);
  const text = lastUserText(call);
  const city = Object.keys(WEATHER).find((c) => text.toLowerCase().includes(c)) ?? 'paris';
  const pace = { chunkDelayMs: 30, usage: { input: 200 + call.prompt.length * 40, output: 40 } };
  if (!has('get_weather')) {
    return {
      ...pace,
      reasoning: `The user asked about ${city}. I will look it up.`,
      text: `Let me check the weather in ${city[0]!.toUpperCase()}${city.slice(1)}.`,
      toolCalls: [{ id: `call_${newId()}`, name: 'get_weather', input: { city } }],
    };
  }
  if (!has('send_report')) {
    return {
      ...pace,
      text: 'I will send a short report to the team; that needs your approval.',
      toolCalls: [
        {
          id: `call_${newId()}`,
          name: 'send_report',
          input: { to: 'team@example.com', body: `Weather in ${city}: see the log.` },
        },
      ],
    };
  }
  if (!has('ask_user')) {
    return {
      ...pace,
      text: 'One question before I finish.',
      toolCalls: [
        {
          id: `call_${newId()}`,
          name: 'ask_user',
          input: {
            questions: [{ id: 'units', question: 'Celsius or Fahrenheit?', choices: ['celsius', 'fahrenheit'] }],
          },
        },
      ],
    };
  }
  const weather = has('get_weather')!;
  const answer = JSON.stringify(has('ask_user')!.output);
  const report = has('send_report')!;
  const sent = report.output.type !== 'execution-denied' && report.output.type !== 'error-text';
  const celsius = weather.output.type === 'json' ? (weather.output.value as { celsius: number }).celsius : undefined;
  const temp =
    celsius === undefined
      ? 'unknown'
      : /fahrenheit/.test(answer)
        ? `${Math.round((celsius * 9) / 5 + 32)}°F`
        : `${celsius}°C`;
  if (version === '2') {
    const name = `${city[0]!.toUpperCase()}${city.slice(1)}`;
    return { ...pace, text: `${name}: ${temp}. Report ${sent ? 'sent to the team' : 'not sent'}.` };
  }
  return { ...pace, text: `It is ${temp} in ${city}. The report was ${sent ? 'sent' : 'not sent'}. Anything else?` };
}

export type DemoVersion = '1' | '2';

const SYSTEM: Record<DemoVersion, string> = {
  '1': 'You are the Keel demo agent. You check the weather, send reports when approved, and ask when unsure.',
  '2': 'You are the Keel demo agent. You check the weather, send reports when approved, and ask when unsure. Answer in one line: "City: temperature. Report status."',
};

/** The demos' weather lookup: a fixed table, a little latency, and an error for unknown cities. */
export function weatherTool(latencyMs = 200) {
  return tool({
    name: 'get_weather',
    description: 'Current temperature of a city in °C',
    input: z.object({ city: z.string() }),
    idempotent: true,
    execute: async ({ city }, { signal }) => {
      await new Promise((r) => setTimeout(r, latencyMs));
      signal.throwIfAborted();
      const celsius = WEATHER[city.toLowerCase()];
      if (celsius === undefined) throw new Error(`no weather station in ${city}`);
      return { city, celsius };
    },
  });
}

/**
 * The agent `npm start` serves when there is no configuration: a scripted model (no keys, no
 * network) that shows a tool call, an approval and an ask_user question. Version 2 (served beside
 * it) has another system prompt and answers in one line: what a rerun and an evaluation compare
 * (docs/evals.md).
 */
export function demoAgent(version: DemoVersion = '1'): AgentDefinition {
  return defineAgent({
    name: 'demo',
    version,
    model: new ScriptedModel([(call) => nextResponse(call, version)], {
      modelId: version === '1' ? 'demo-script' : 'demo-script-2',
      loop: true,
    }),
    system: SYSTEM[version],
    tools: [
      weatherTool(),
      tool({
        name: 'send_report',
        description: 'Sends a report by email (asks for approval first)',
        input: z.object({ to: z.string(), body: z.string() }),
        approval: 'always',
        execute: async ({ to }) => ({ sent: true, to }),
      }),
      askUser(),
    ],
  });
}
