/** What a log event says, in a line: the text of a message, a tool's result, a compaction's summary. */
export function textOfContent(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((p: { type?: string; text?: string; toolName?: string; input?: unknown; output?: { value?: unknown } }) => {
      if (p.type === 'text') return p.text ?? '';
      if (p.type === 'tool-result')
        return `${p.toolName ?? 'tool'} → ${JSON.stringify(p.output?.value ?? p.output ?? null)}`;
      if (p.type === 'tool-call') return `[${p.toolName ?? 'tool'}(${JSON.stringify(p.input)})]`;
      if (p.type === 'reasoning') return '';
      if (p.type === 'file') return '[file]';
      return '';
    })
    .filter((s) => s !== '')
    .join(' ');
}

export function eventText(type: string, data: unknown): string {
  const d = (data ?? {}) as Record<string, unknown>;
  const message = d.message as { content?: unknown } | undefined;
  if (message?.content !== undefined) return textOfContent(message.content);
  if (type === 'tool/result') {
    const out = d.output as { type?: string; value?: unknown } | undefined;
    return `${String(d.toolName ?? d.tool_name ?? 'tool')} → ${JSON.stringify(out?.value ?? out ?? null)}`;
  }
  if (type === 'compaction' || type === 'branch/summary') return String(d.summary ?? '');
  return '';
}
