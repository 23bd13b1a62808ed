import { z } from 'zod';
import { FieldValidationError } from './field-validation-error.ts';

/** An option of `sessions.send` that is not valid: a `validation` error naming it. */
export class InvalidSendOptionError extends FieldValidationError {}

const positiveMs = z.number().int().positive().finite();

/**
 * What `sessions.send` takes besides the message (SendOptions and the RunOptions it extends: a new
 * option goes in both), as the HTTP API checks its own: an option it does not know is refused
 * rather than stored with the run and ignored.
 */
const SendOptionsSchema = z.strictObject({
  ifBusy: z.enum(['reject', 'enqueue', 'steer', 'interrupt']).optional(),
  agent: z.string().min(1).optional(),
  idempotency: z.strictObject({ tenant: z.string(), key: z.string(), fingerprint: z.string() }).optional(),
  timeoutMs: positiveMs.optional(),
  waitTimeoutMs: positiveMs.optional(),
  maxAttempts: z.number().int().min(1).optional(),
  trace: z.strictObject({ traceparent: z.string(), tracestate: z.string().optional() }).optional(),
  priority: z.union([z.enum(['interactive', 'batch']), z.number().finite()]).optional(),
  apiKey: z.string().min(1).optional(),
  overrides: z
    .strictObject({
      system: z.string().optional(),
      model: z.string().min(3).optional(),
      settings: z.record(z.string(), z.unknown()).optional(),
      tools: z.array(z.string()).optional(),
      maxSteps: z.number().int().min(1).optional(),
    })
    .optional(),
  clientTools: z
    .array(
      z.strictObject({
        name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'a tool name: 1 to 64 letters, digits, _ or -'),
        description: z.string().max(4096).optional(),
        parameters: z.record(z.string(), z.json()).optional(),
      }),
    )
    .max(128)
    .optional(),
});

/** Throws InvalidSendOptionError, naming the first option at fault, unless `o` is valid send options. */
export function checkSendOptions(o: unknown): void {
  // No options (the common case): nothing to check, and no schema walk on a run's way in.
  if (o === undefined || (typeof o === 'object' && o !== null && Object.keys(o).length === 0)) return;
  const parsed = SendOptionsSchema.safeParse(o);
  if (parsed.success) return;
  const issue = parsed.error.issues[0]!;
  const field = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : issue.path.join('.') || 'options';
  throw new InvalidSendOptionError(field, issue.code === 'unrecognized_keys' ? 'not an option of send' : issue.message);
}
