import type { UserMessage } from '../model/index.ts';
import { InvalidEventError } from './event-types.ts';

/**
 * Refuses a user message that gives the model nothing to answer: no part, or only texts that are
 * empty or blank (no file). Providers refuse such a message (or answer it with nonsense) only once
 * the run is under way; the runtime refuses it where it is handed in. The event's schema stays as
 * it was: logs written before this check (and imports of them) may hold such messages.
 */
export function assertMessageSaysSomething(message: UserMessage): void {
  if (message.content.some((p) => p.type === 'file' || p.text.trim().length > 0)) return;
  throw new InvalidEventError('user/message', 'message: the message says nothing (no file, and no text that is not blank)');
}
