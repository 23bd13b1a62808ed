import { v7 } from 'uuid';

/** A unique id that sorts by creation time (UUIDv7), so ids double as a coarse clock. */
export const newId = (): string => v7();
