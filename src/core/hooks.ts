import type { LanguageModelV4 } from '@ai-sdk/provider';
import type { Message, Usage, UserMessage } from '../model/index.ts';
import type { CallSettings, SystemPrompt } from './agent.ts';
import type { UserInput } from './inbox.ts';
import type { Tool } from './tools.ts';

/** A change to the running turn's configuration. It takes effect at the next step boundary. */
export interface ConfigChange {
  model?: LanguageModelV4;
  system?: SystemPrompt;
  tools?: readonly Tool[];
  settings?: CallSettings;
}

export interface BoundaryContext {
  readonly turn: number;
  /** Steps completed so far in this turn. */
  readonly step: number;
  readonly conversation: readonly Message[];
  readonly usage: Usage;
  readonly signal: AbortSignal;
  /** Adds input to this turn: it enters the next step. */
  steer(input: UserInput | UserMessage): void;
  configure(change: ConfigChange): void;
  /** Ends the turn at this boundary as `paused`; it resumes from here (see TurnOptions.resume). */
  pause(): void;
}

export interface CompactionContext extends BoundaryContext {
  /** `threshold`: checked at every step boundary; `overflow`: the provider refused the prompt as too long. */
  reason: 'threshold' | 'overflow';
  /** Input tokens of the last model call, as the provider reported them. */
  lastInputTokens: number | undefined;
  /**
   * Commits what the turn reported so far. A hook that reads the session log calls it first; one
   * that decides not to compact does not, so an uncompacted boundary costs no commit.
   */
  flush(): Promise<void>;
}

/**
 * Extension points of the loop. All run between steps, never while a model call or tool runs.
 */
export interface TurnHooks {
  /** Before every step (after steering and config changes were applied). */
  beforeStep?(ctx: BoundaryContext): void | Promise<void>;
  /** When the turn is about to end with nothing left to do: steer to keep it going. */
  turnStopping?(ctx: BoundaryContext): void | Promise<void>;
  /** After the model call alone was cancelled. Return 'continue' to go on with the next step. */
  modelCallCancelled?(ctx: BoundaryContext): 'continue' | 'end' | Promise<'continue' | 'end'>;
  /**
   * May replace the working conversation with a compacted one. Return undefined to leave it.
   * On `overflow`, returning a conversation retries the model call once.
   */
  compact?(ctx: CompactionContext): Message[] | undefined | Promise<Message[] | undefined>;
}
