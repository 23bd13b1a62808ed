import { clearLine, createInterface, cursorTo, type Interface } from 'node:readline';

export type Read = { kind: 'line'; text: string } | { kind: 'eof' } | { kind: 'interrupt' };

/**
 * Lines from the terminal (or a pipe), pulled one prompt at a time. Lines typed or piped ahead
 * wait in order. Ctrl-C on an empty prompt answers the pending read with `interrupt` (with text,
 * it clears the line); with no read pending it calls `onInterrupt`. Ctrl-D on an empty line, or
 * the end of a pipe, is `eof` once queued lines are used up.
 */
export class LineInput {
  readonly terminal: boolean;
  /** Ctrl-C while nothing is being read (a run is streaming). */
  onInterrupt: (() => void) | undefined;
  /** Ctrl-D (or the end of the input) while nothing is being read. */
  onClose: (() => void) | undefined;
  private readonly rl: Interface;
  private readonly out: NodeJS.WritableStream;
  private readonly queue: string[] = [];
  private pending: ((r: Read) => void) | undefined;
  private closed = false;

  constructor(input: NodeJS.ReadableStream & { isTTY?: boolean }, output: NodeJS.WritableStream & { isTTY?: boolean }) {
    this.terminal = input.isTTY === true && output.isTTY === true;
    this.out = output;
    this.rl = createInterface({ input, output, terminal: this.terminal, historySize: this.terminal ? 100 : 0 });
    this.rl.on('line', (text) => {
      if (this.pending) {
        // A terminal echoes what is typed; from a pipe, show the line after its prompt.
        if (!this.terminal) this.out.write(`${text}\n`);
        this.settle({ kind: 'line', text });
      } else this.queue.push(text);
    });
    this.rl.on('close', () => {
      this.closed = true;
      if (this.pending) {
        if (this.terminal) this.out.write('\n');
        this.settle({ kind: 'eof' });
      } else this.onClose?.();
    });
    this.rl.on('SIGINT', () => {
      if (!this.pending) {
        this.onInterrupt?.();
        return;
      }
      if (this.rl.line !== '') {
        // Ctrl-C with something typed clears it, as in a shell.
        this.rl.write(null, { ctrl: true, name: 'e' });
        this.rl.write(null, { ctrl: true, name: 'u' });
        return;
      }
      this.out.write('^C\n');
      this.settle({ kind: 'interrupt' });
    });
  }

  /** A prompt is shown and waits for a line. */
  get reading(): boolean {
    return this.pending !== undefined;
  }

  private settle(r: Read): void {
    const p = this.pending;
    this.pending = undefined;
    p?.(r);
  }

  read(prompt: string): Promise<Read> {
    if (this.pending) throw new Error('LineInput: one read at a time');
    const queued = this.queue.shift();
    if (queued !== undefined) {
      // Typed or piped ahead: show it after its prompt, as if typed now.
      this.out.write(`${prompt}${queued}\n`);
      return Promise.resolve({ kind: 'line', text: queued });
    }
    if (this.closed) return Promise.resolve({ kind: 'eof' });
    return new Promise((resolve) => {
      this.pending = resolve;
      this.rl.setPrompt(prompt);
      this.rl.prompt();
    });
  }

  /** Forgets lines typed ahead (before the question they would answer was shown). */
  discardTypeahead(): void {
    this.queue.length = 0;
  }

  /** Ends a pending read as if the input had ended (the chat is quitting). */
  abortRead(): void {
    if (this.pending) {
      this.out.write('\n');
      this.settle({ kind: 'eof' });
    }
  }

  /** Writes output; above the prompt (then shown again) while one is waiting for a line. */
  print(text: string): void {
    if (text === '') return;
    if (!this.pending || !this.terminal) {
      this.out.write(text);
      return;
    }
    clearLine(this.out, 0);
    cursorTo(this.out, 0);
    this.out.write(text.endsWith('\n') ? text : `${text}\n`);
    this.rl.prompt(true);
  }

  close(): void {
    this.closed = true;
    this.rl.close();
  }
}
