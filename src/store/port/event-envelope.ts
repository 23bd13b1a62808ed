/**
 * The event envelope: what every event of a session log carries around its data, declared once.
 * A draft (`EventDraft`) is the envelope before the store gives it a seq; a stored event
 * (`StoredEvent`) and a decoded one (`SessionEvent`) are the envelope after. The field names are
 * the wire names (`v` is the version, `runId` the run, `parentId` the parent entry).
 */
export interface EventEnvelope {
  id: string;
  type: string;
  /** The version of the event's data schema. */
  v: number;
  /** When it happened (ms since the epoch). */
  time: number;
  runId?: string;
  turn?: number;
  step?: number;
  /** A conversational entry: it joins the tree under its parent and becomes the new leaf. */
  entry: boolean;
  parentId?: string;
}

/** The envelope after the store appended it: its session and its seq (1, 2, … without a gap). */
export interface Sequenced {
  sessionId: string;
  seq: number;
}
