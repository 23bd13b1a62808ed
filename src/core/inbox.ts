import type { UserMessage } from '../model/index.ts';
import { newId } from './ids.ts';

export type UserInput = string | UserMessage['content'];

export function userMessage(input: UserInput | UserMessage): UserMessage {
  if (typeof input !== 'string' && !Array.isArray(input)) return input;
  return { id: newId(), role: 'user', content: typeof input === 'string' ? [{ type: 'text', text: input }] : input };
}

/**
 * Input that arrives while a turn runs. Steering joins the current turn at its next step
 * boundary; follow-ups wait until the turn has stopped and are the caller's to start next.
 */
export class Inbox {
  private steering: UserMessage[] = [];
  private followUps: UserMessage[] = [];

  steer(input: UserInput | UserMessage): UserMessage {
    const m = userMessage(input);
    this.steering.push(m);
    return m;
  }

  followUp(input: UserInput | UserMessage): UserMessage {
    const m = userMessage(input);
    this.followUps.push(m);
    return m;
  }

  get hasSteering(): boolean {
    return this.steering.length > 0;
  }

  get hasFollowUps(): boolean {
    return this.followUps.length > 0;
  }

  takeSteering(): UserMessage[] {
    const taken = this.steering;
    this.steering = [];
    return taken;
  }

  takeFollowUps(): UserMessage[] {
    const taken = this.followUps;
    this.followUps = [];
    return taken;
  }
}
