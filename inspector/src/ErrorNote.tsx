import { ApiError } from './api.ts';

/** What went wrong, in a line (the API's problem detail when there is one). */
export function ErrorNote(props: { error: unknown }) {
  if (!props.error) return null;
  const e = props.error as Error;
  const type =
    e instanceof ApiError && typeof e.problem?.type === 'string' ? e.problem.type.replace(/^.*\//, '') : undefined;
  return (
    <p class="error" role="alert">
      {type ? `${type}: ` : ''}
      {e.message}
    </p>
  );
}
