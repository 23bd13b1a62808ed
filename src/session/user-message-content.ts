import type { UserMessage } from '../model/index.ts';
import { InvalidEventError, type EventRegistry, type SessionEventDataMap } from './event-types.ts';

/**
 * A caller's user message as its event's schema parses it, refused (InvalidEventError) when its
 * parts are not a user message's or when it gives the model nothing to answer: no part, or only
 * texts that are empty or blank (no file). Providers refuse such a message (or answer it with
 * nonsense) only once the run is under way; the runtime refuses it where it is handed in. The
 * event's schema stays as it was: logs written before this check (and imports of them) may hold
 * such messages.
 */
export function checkedUserMessage(registry: EventRegistry, message: UserMessage): UserMessage {
  const checked = (
    registry.validate('user/message', { message, via: 'input' }).data as SessionEventDataMap['user/message']
  ).message;
  if (checked.content.some((p) => p.type === 'file' || p.text.trim().length > 0)) return checked;
  throw new InvalidEventError(
    'user/message',
    'message: the message says nothing (no file, and no text that is not blank)',
  );
}
