import { weatherTool } from '../config/demo.ts';
import { defineAgent, MemorySink, startTurn, type DeltaEvent, type TurnEvent } from '../core/index.ts';
import { ScriptedModel } from '../model/index.ts';

/** The loop demo agent: a scripted model and the weather tool, so it runs with no keys and no network. */
export function demoAgent(chunkDelayMs = 25) {
  const model = new ScriptedModel(
    [
      {
        reasoning: 'The user wants two cities; I can look both up at once.',
        text: 'Let me look up both cities.',
        toolCalls: [
          { name: 'get_weather', input: { city: 'Paris' } },
          { name: 'get_weather', input: { city: 'Tokyo' } },
        ],
        usage: { input: 120, output: 40 },
        chunkDelayMs,
      },
      {
        text: 'You also asked about Berlin, so one more lookup.',
        toolCalls: [{ name: 'get_weather', input: { city: 'Berlin' } }],
        usage: { input: 220, output: 30 },
        chunkDelayMs,
      },
      {
        text: 'Paris is 18°C, Tokyo is 24°C and Berlin is 15°C. Tokyo is the warmest, 9 degrees above Berlin.',
        usage: { input: 300, output: 35 },
        chunkDelayMs,
      },
    ],
    { modelId: 'demo-script' },
  );
  return defineAgent({
    name: 'demo',
    version: '1',
    model,
    system: 'You are a concise weather assistant.',
    tools: [weatherTool(150)],
  });
}

const color = process.stdout.isTTY === true && !process.env.NO_COLOR;
const dim = (s: string) => (color ? `\x1b[2m${s}\x1b[0m` : s);
const bold = (s: string) => (color ? `\x1b[1m${s}\x1b[0m` : s);

/** Prints a turn as it happens: durable events as lines, deltas as streamed text. */
class TerminalSink extends MemorySink {
  private streaming: DeltaEvent['type'] | undefined;
  private readonly out: NodeJS.WritableStream;
  private readonly onToolCall: () => void;
  constructor(out: NodeJS.WritableStream, onToolCall: () => void) {
    super({ keepDeltas: false });
    this.out = out;
    this.onToolCall = onToolCall;
  }
  private endLine(): void {
    if (this.streaming) this.out.write('\n');
    this.streaming = undefined;
  }
  override delta(e: DeltaEvent): void {
    if (e.type === 'tool-input/delta') return;
    if (this.streaming !== e.type) {
      this.endLine();
      this.out.write(e.type === 'text/delta' ? bold('assistant> ') : dim('thinking> '));
    }
    this.streaming = e.type;
    this.out.write(e.type === 'reasoning/delta' ? dim(e.delta) : e.delta);
  }
  override async append(events: readonly TurnEvent[]): Promise<void> {
    await super.append(events);
    for (const e of events) {
      switch (e.type) {
        case 'step/start':
          this.endLine();
          this.out.write(`${dim(`── step ${e.step} ──`)}\n`);
          break;
        case 'user/message':
          this.endLine();
          this.out.write(
            `${bold(e.data.via === 'steer' ? 'user (steering)> ' : 'user> ')}${e.data.message.content.map((p) => (p.type === 'text' ? p.text : '[file]')).join('')}\n`,
          );
          break;
        case 'assistant/message':
          this.endLine();
          break;
        case 'tool/call':
          this.out.write(`  ${dim('→')} ${e.data.toolName}(${JSON.stringify(e.data.input)})\n`);
          this.onToolCall();
          break;
        case 'tool/result':
          this.out.write(
            `  ${dim('←')} ${e.data.toolName}: ${e.data.output.type === 'error' ? `error ${e.data.output.code}: ${e.data.output.message}` : JSON.stringify(e.data.output.value)} ${dim(`${e.data.durationMs} ms`)}\n`,
          );
          break;
        case 'step/end':
          this.out.write(
            `${dim(`   step ${e.step} ended: ${e.data.reason}, ${e.data.usage.inputTokens} in / ${e.data.usage.outputTokens} out tokens`)}\n`,
          );
          break;
        case 'turn/end':
          this.endLine();
          this.out.write(
            `${bold(`turn ended: ${e.data.reason} after ${e.data.steps} steps (${e.data.usage.inputTokens + e.data.usage.outputTokens} tokens)`)}\n`,
          );
          break;
        default:
          break;
      }
    }
  }
}

export async function runDemo(out: NodeJS.WritableStream = process.stdout, chunkDelayMs = 25): Promise<number> {
  out.write(`${bold('Keel demo')}: one turn on a scripted model (no keys, no network).\n`);
  out.write(dim('The user steers while the first tools run; the steering joins at the next step boundary.\n\n'));
  let steered = false;
  // The steering arrives while step 1's tools run: it must not disturb them, and enters step 2.
  const sink = new TerminalSink(out, () => {
    if (!steered) turn.inbox.steer('And Berlin, please.');
    steered = true;
  });
  const turn = startTurn(demoAgent(chunkDelayMs), { sink, input: 'How warm is it in Paris and Tokyo?' });
  const result = await turn.result;
  return result.reason === 'completed' ? 0 : 1;
}
