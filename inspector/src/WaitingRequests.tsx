import type { Run } from 'keel/client';
import { useState } from 'preact/hooks';
import { ErrorNote } from './ErrorNote.tsx';
import { json, time } from './format.ts';
import { keel } from './keel.ts';
import type { WaitingRequest } from './types.ts';
import { useAction } from './use-action.ts';

interface Question {
  id: string;
  question: string;
  choices?: string[];
}

/** What a waiting run waits for, with the controls to decide it: approve, deny with a reason, answer (a sleep or a signal: what it waits for). */
export function WaitingRequests(props: { run: Run; onDecided: () => void }) {
  const w = props.run.waiting;
  if (!w) return null;
  return (
    <div class="waiting">
      {w.quota && (
        <p class="request card">
          Waits for the quota {w.quota.limit} of {w.quota.scope}: {w.quota.used} used
          {w.quota.reserved ? `, ${w.quota.reserved} reserved` : ''} of {w.quota.max}
          {w.expires_at && `; tries again at ${new Date(w.expires_at).toLocaleString()}`}
        </p>
      )}
      {w.requests.map((r) =>
        r.kind === 'approval' ? (
          <Approval key={r.approval_id} run={props.run} request={r} onDecided={props.onDecided} />
        ) : r.kind === 'input' ? (
          <Answer key={r.tool_call_id} run={props.run} request={r} onDecided={props.onDecided} />
        ) : (
          <p class="request card" key={r.tool_call_id}>
            {r.kind === 'sleep' ? `Sleeps until ${time(r.until)}` : `Waits for the signal ${r.signal ?? '?'}`}
            {r.decided && <span class="muted"> (done)</span>}
          </p>
        ),
      )}
      {w.expires_at && <p class="muted">Expires {new Date(w.expires_at).toLocaleString()}</p>}
    </div>
  );
}

function Approval(props: { run: Run; request: WaitingRequest; onDecided: () => void }) {
  const [reason, setReason] = useState('');
  const act = useAction(props.onDecided);
  const r = props.request;
  const decide = (decision: 'approve' | 'deny') =>
    act.run(() =>
      decision === 'approve'
        ? keel().runs.approve(props.run.id, r.approval_id)
        : keel().runs.deny(props.run.id, r.approval_id, reason.trim() !== '' ? { reason: reason.trim() } : {}),
    );
  return (
    <div class="request card" data-testid="approval">
      <div>
        Approve <strong class="tool-name">{r.tool}</strong>?{r.decided && <span class="muted"> (decided)</span>}
      </div>
      <pre class="args">{json(r.arguments)}</pre>
      {!r.decided && (
        <div class="row">
          <button disabled={act.busy} onClick={() => decide('approve')}>
            Approve
          </button>
          <input
            aria-label="Reason for denying"
            placeholder="reason (optional)"
            value={reason}
            onInput={(e) => setReason(e.currentTarget.value)}
          />
          <button class="danger" disabled={act.busy} onClick={() => decide('deny')}>
            Deny
          </button>
        </div>
      )}
      <ErrorNote error={act.error} />
    </div>
  );
}

function Answer(props: { run: Run; request: WaitingRequest; onDecided: () => void }) {
  const r = props.request;
  const questions = ((r.arguments as { questions?: Question[] } | null)?.questions ?? []).filter(
    (q) => typeof q?.id === 'string',
  );
  const [answers, setAnswers] = useState<Record<string, string>>(() =>
    Object.fromEntries(questions.map((q) => [q.id, q.choices?.[0] ?? ''])),
  );
  const act = useAction(props.onDecided);
  const send = () =>
    act.run(() =>
      keel().runs.input(props.run.id, questions.length > 0 ? answers : (answers.answer ?? ''), {
        toolCallId: r.tool_call_id,
      }),
    );
  return (
    <div class="request card" data-testid="question">
      <div>
        <strong>{r.tool}</strong> asks:{r.decided && <span class="muted"> (answered)</span>}
      </div>
      {questions.length === 0 && <pre class="args">{json(r.arguments)}</pre>}
      {!r.decided && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void send();
          }}
        >
          {(questions.length > 0 ? questions : [{ id: 'answer', question: 'Your answer' }]).map((q) => (
            <label class="question" key={q.id}>
              <span>{q.question}</span>
              {q.choices && q.choices.length > 0 ? (
                <select
                  aria-label={q.question}
                  value={answers[q.id]}
                  onChange={(e) => setAnswers({ ...answers, [q.id]: e.currentTarget.value })}
                >
                  {q.choices.map((c) => (
                    <option key={c} value={c}>
                      {c}
                    </option>
                  ))}
                </select>
              ) : (
                <input
                  aria-label={q.question}
                  value={answers[q.id] ?? ''}
                  onInput={(e) => setAnswers({ ...answers, [q.id]: e.currentTarget.value })}
                />
              )}
            </label>
          ))}
          <button type="submit" disabled={act.busy}>
            Answer
          </button>
        </form>
      )}
      <ErrorNote error={act.error} />
    </div>
  );
}
