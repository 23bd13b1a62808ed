import type { KeelEvent } from 'keel/client';
import { oneLine, shortId } from './format.ts';
import { eventText } from './text-of.ts';

interface Node {
  entry: KeelEvent;
  children: Node[];
}

/**
 * The session's entries as a tree: each entry under its parent. A fork is an entry with more
 * than one child; the leaf (where the next message goes) is marked; compactions and branch
 * summaries stand out. Each entry offers: make it the leaf, fork from it.
 */
export function BranchTree(props: {
  entries: KeelEvent[];
  leafId: string | null;
  onLeaf: (id: string) => void;
  onFork: (id: string, into: 'branch' | 'session') => void;
}) {
  const byId = new Map<string, Node>();
  for (const e of props.entries) byId.set(e.id, { entry: e, children: [] });
  const roots: Node[] = [];
  for (const n of byId.values()) {
    const parent = n.entry.parent_id !== undefined ? byId.get(n.entry.parent_id) : undefined;
    if (parent) parent.children.push(n);
    else roots.push(n);
  }
  // The path from the root to the leaf: the branch the transcript shows.
  const onPath = new Set<string>();
  for (let id = props.leafId ?? undefined; id !== undefined; id = byId.get(id)?.entry.parent_id) onPath.add(id);
  if (roots.length === 0) return <p class="empty">No entries yet.</p>;
  return (
    <ul class="tree" data-testid="branch-tree">
      {roots.map((n) => (
        <TreeNode key={n.entry.id} node={n} {...props} onPath={onPath} />
      ))}
    </ul>
  );
}

function TreeNode(props: {
  node: Node;
  leafId: string | null;
  onPath: Set<string>;
  onLeaf: (id: string) => void;
  onFork: (id: string, into: 'branch' | 'session') => void;
}) {
  // A chain of single children is drawn flat; a fork indents its branches.
  const chain: Node[] = [props.node];
  while (chain.at(-1)!.children.length === 1) chain.push(chain.at(-1)!.children[0]!);
  const last = chain.at(-1)!;
  return (
    <li>
      {chain.map((n) => {
        const e = n.entry;
        const isLeaf = e.id === props.leafId;
        return (
          <div
            key={e.id}
            class={`entry type-${e.type.replace('/', '-')} ${props.onPath.has(e.id) ? 'on-path' : 'off-path'} ${isLeaf ? 'leaf' : ''}`}
          >
            <span class="seq">#{e.seq}</span> <span class="kind">{e.type}</span>{' '}
            {oneLine(eventText(e.type, e.data), 80)}
            {n.children.length > 1 && <span class="badge">fork · {n.children.length} branches</span>}
            {isLeaf && <span class="badge leaf-badge">leaf</span>}
            <span class="entry-actions">
              {!isLeaf && (
                <button class="link" title={`Move the leaf to ${shortId(e.id)}`} onClick={() => props.onLeaf(e.id)}>
                  make leaf
                </button>
              )}
              <button class="link" title="Fork into a new branch here" onClick={() => props.onFork(e.id, 'branch')}>
                fork → branch
              </button>
              <button class="link" title="Fork into a new session" onClick={() => props.onFork(e.id, 'session')}>
                fork → session
              </button>
            </span>
          </div>
        );
      })}
      {last.children.length > 1 && (
        <ul>
          {last.children.map((c) => (
            <TreeNode key={c.entry.id} {...props} node={c} />
          ))}
        </ul>
      )}
    </li>
  );
}
