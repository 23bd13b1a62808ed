/**
 * The statements this process sends to PostgreSQL while `fn` runs (node-postgres's
 * `Client.prototype.query` wrapped): each with its text on one line, the connection it went on
 * (numbered from 0 in order of first use), and whether it was sent while one sent before it on
 * that connection was still unanswered (pipelined).
 */
import pg from 'pg';

export interface SentStatement {
  text: string;
  client: number;
  pipelined: boolean;
}

export async function sentDuring(fn: () => Promise<void>): Promise<SentStatement[]> {
  const sent: SentStatement[] = [];
  const clients = new WeakMap<object, number>();
  const unanswered = new WeakMap<object, number>();
  let next = 0;
  const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (
    this: object,
    ...args: unknown[]
  ) {
    if (!clients.has(this)) clients.set(this, next++);
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text;
    const waiting = unanswered.get(this) ?? 0;
    sent.push({ text: String(text).replace(/\s+/g, ' '), client: clients.get(this)!, pipelined: waiting > 0 });
    unanswered.set(this, waiting + 1);
    const answered = () => unanswered.set(this, (unanswered.get(this) ?? 1) - 1);
    // pg.Pool's query passes a callback (and gets no promise back).
    const callback = args.findIndex((a) => typeof a === 'function');
    if (callback >= 0) {
      const told = args[callback] as (...a: unknown[]) => void;
      args[callback] = (...a: unknown[]) => {
        answered();
        told(...a);
      };
      return original.apply(this, args);
    }
    const answer = original.apply(this, args) as Promise<unknown>;
    answer.then(answered, answered);
    return answer;
  };
  try {
    await fn();
  } finally {
    (pg.Client.prototype as unknown as { query: unknown }).query = original;
  }
  return sent;
}
