import { KeelProblem } from 'keel/client';

/** What went wrong, in a line: a problem's type and detail, or the error's message (the server is unreachable…). */
export function ErrorNote(props: { error: unknown }) {
  const e = props.error;
  if (!e) return null;
  return (
    <p class="error" role="alert" title={e instanceof KeelProblem ? `${e.status} ${e.title}` : undefined}>
      {e instanceof KeelProblem ? `${e.type}: ${e.detail}` : e instanceof Error ? e.message : String(e)}
    </p>
  );
}
