/**
 * Keel's MCP endpoint keeps no state between requests: any server process answers any request,
 * before and after a restart (ADR-0038). What it needs to remember of a client's `initialize` (the
 * capabilities it declared) travels in the MCP session id it hands out, which the client sends
 * with every later request: `<random>.<base64url of the abilities as JSON>`. A client can only
 * claim abilities of its own this way; its tenant comes from its API key, on every request.
 */
import { randomBytes } from 'node:crypto';

/** What the client said it can do that the server makes use of. */
export interface ClientAbilities {
  /** Form elicitation (`elicitation/create`): Keel asks it its runs' approvals and questions. */
  elicitation: boolean;
}

const NONE: ClientAbilities = { elicitation: false };

/** The abilities of the capabilities an `initialize` request declares. */
export function abilitiesOf(capabilities: unknown): ClientAbilities {
  const e = (capabilities as { elicitation?: unknown } | undefined)?.elicitation;
  if (e === null || typeof e !== 'object') return NONE;
  // An empty elicitation capability is form elicitation (the protocol's backwards compatibility).
  const modes = e as { form?: unknown; url?: unknown };
  return { elicitation: modes.form !== undefined || modes.url === undefined };
}

/** A new session id that carries the abilities. */
export function sessionIdFor(a: ClientAbilities): string {
  return `${randomBytes(12).toString('base64url')}.${Buffer.from(JSON.stringify({ e: a.elicitation ? 1 : 0 })).toString('base64url')}`;
}

/** The abilities a session id carries (none, for no id or one Keel did not make). */
export function abilitiesOfSession(id: string | undefined): ClientAbilities {
  const encoded = id?.split('.')[1];
  if (!encoded) return NONE;
  try {
    const v = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as { e?: unknown };
    return { elicitation: v.e === 1 };
  } catch {
    return NONE;
  }
}
