/**
 * Scorers (issue 40): how a candidate's outcome compares with the reference (the recorded run, or
 * the item's expected answer). Built in: `tool_calls` (the same tools in the same order),
 * `arguments` (the reference's calls made with the same arguments), `final_text` (word overlap of
 * the final answers), `status` (the same end). A score is a number from 0 (nothing alike) to 1
 * (the same); an item's `score` is the mean of its scores. Code scorers (keel.config `scorers`)
 * and model-as-judge scorers (`judgeScorer`) add their own. Tokens, cost and latency are metrics,
 * reported beside the scores, never averaged into them.
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { canonicalJson } from '../../core/index.ts';
import { callModel, type JsonValue } from '../../model/index.ts';
import type { Outcome } from './frozen-run.ts';

/** The item a scorer sees: its frozen source, and what a person expects of it, if anything. */
export interface ScoredItem {
  id: string;
  sourceRunId: string;
  expected: JsonValue | null;
  notes: string | null;
}

/** A score from 0 to 1 for `candidate` against `reference`. */
export type Scorer = (item: ScoredItem, candidate: Outcome, reference: Outcome) => number | Promise<number>;

export const BUILT_IN_SCORERS: Record<string, Scorer> = {
  tool_calls: (_item, c, r) =>
    sequenceSimilarity(
      c.toolCalls.map((x) => x.name),
      r.toolCalls.map((x) => x.name),
    ),
  arguments: (_item, c, r) => {
    if (r.toolCalls.length === 0) return c.toolCalls.length === 0 ? 1 : 0;
    const made = c.toolCalls.map((x) => `${x.name}\u0000${canonicalJson(x.input)}`);
    let matched = 0;
    for (const x of r.toolCalls) {
      const i = made.indexOf(`${x.name}\u0000${canonicalJson(x.input)}`);
      if (i >= 0) {
        matched++;
        made.splice(i, 1);
      }
    }
    return matched / Math.max(r.toolCalls.length, c.toolCalls.length);
  },
  final_text: (item, c, r) =>
    textSimilarity(c.finalText ?? '', typeof item.expected === 'string' ? item.expected : (r.finalText ?? '')),
  status: (_item, c, r) => (c.status === r.status ? 1 : 0),
};

/** The metrics reported beside the scores (lower is better). */
export const metricsOf = (o: Outcome) => ({
  tokens: o.usage.inputTokens + o.usage.outputTokens,
  cost: o.cost,
  latency_ms: o.latencyMs,
});

const words = (s: string) => s.toLowerCase().match(/[\p{L}\p{N}°]+/gu) ?? [];

/** 2·LCS / (|a| + |b|) over the words of two texts: 1 for the same words in the same order, 0 for none in common. */
export function textSimilarity(a: string, b: string): number {
  return sequenceSimilarity(words(a), words(b));
}

/** 2·LCS / (|a| + |b|) of two sequences (1 when both are empty). */
export function sequenceSimilarity(a: readonly string[], b: readonly string[]): number {
  if (a.length === 0 && b.length === 0) return 1;
  let prev = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    const row = new Array<number>(b.length + 1).fill(0);
    for (let j = 1; j <= b.length; j++)
      row[j] = a[i - 1] === b[j - 1] ? prev[j - 1]! + 1 : Math.max(prev[j]!, row[j - 1]!);
    prev = row;
  }
  return (2 * prev[b.length]!) / (a.length + b.length);
}

/**
 * A model-as-judge scorer: `model` reads the rubric, the reference answer (the expected one, if the
 * item has it) and the candidate's, and answers with a score from 0 to 1 as JSON `{"score": x}`.
 * An answer without one fails the scoring of that item (it is not guessed).
 */
export function judgeScorer(o: { model: LanguageModelV4; rubric: string }): Scorer {
  return async (item, candidate, reference) => {
    const expected = typeof item.expected === 'string' ? item.expected : reference.finalText;
    const prompt = [
      `Rubric: ${o.rubric}`,
      `Reference answer: ${expected ?? '(none)'}`,
      `Candidate answer: ${candidate.finalText ?? '(none)'}`,
      'Score the candidate answer against the rubric from 0 (fails it) to 1 (meets it fully).',
      'Answer only with JSON: {"score": <number between 0 and 1>}.',
    ].join('\n\n');
    const r = await callModel(
      o.model,
      {
        prompt: [
          { role: 'system', content: 'You grade answers of an AI agent. You answer only with JSON.' },
          { role: 'user', content: [{ type: 'text', text: prompt }] },
        ],
        temperature: 0,
      },
      AbortSignal.timeout(120_000),
    );
    const text = r.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    const m = /"score"\s*:\s*(-?\d+(?:\.\d+)?)/.exec(text);
    const score = m ? Number(m[1]) : NaN;
    if (!(score >= 0 && score <= 1)) throw new Error(`the judge gave no score between 0 and 1: ${text.slice(0, 200)}`);
    return score;
  };
}
