/**
 * The import-circle check: no file under src/ may reach itself again through relative imports.
 * Every relative import of a .ts file counts, type imports and re-exports included (a type-only
 * circle still ties the files' layers together). Finds the strongly connected components of the
 * import graph (Tarjan), prints each circle with its files and one loop through them, and exits 1
 * if there is any. Usage: node scripts/check-import-circles.mjs [folder, default src]
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(process.argv[2] ?? 'src');
const shown = (file) => path.relative(process.cwd(), file);

/** Every .ts file under `dir` (declaration files aside). */
function sourceFiles(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|tsx|mts)$/.test(entry.name) && !/\.d\.[cm]?ts$/.test(entry.name)) out.push(p);
  }
  return out.sort();
}

const files = sourceFiles(root);
const known = new Set(files);

/** The file a relative specifier names, if it is one of ours: as written, .js for .ts, or a folder's index.ts. */
function resolve(from, specifier) {
  const target = path.resolve(path.dirname(from), specifier);
  const candidates = [target, target + '.ts', target.replace(/\.js$/, '.ts'), path.join(target, 'index.ts')];
  return candidates.find((c) => known.has(c));
}

/** Each file's relative imports (static, type-only, re-exports, dynamic), as TypeScript's own scanner reads them. */
const imports = new Map();
for (const file of files) {
  const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
  const targets = new Set();
  for (const { fileName } of importedFiles) {
    if (!fileName.startsWith('./') && !fileName.startsWith('../')) continue;
    const target = resolve(file, fileName);
    if (target) targets.add(target);
  }
  imports.set(file, [...targets]);
}

/** Tarjan's strongly connected components; a component of more than one file (or a file importing itself) is a circle. */
function circles() {
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of imports.get(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || imports.get(v).includes(v)) found.push(component.sort());
  };
  for (const file of files) if (!index.has(file)) visit(file);
  return found;
}

/** One shortest loop from the component's first file back to it, within the component (breadth first). */
function loopThrough(component) {
  const inside = new Set(component);
  const start = component[0];
  const cameFrom = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift();
    for (const w of imports.get(v)) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const loop = [start];
        for (let u = v; u !== start; u = cameFrom.get(u)) loop.splice(1, 0, u);
        return [...loop, start];
      }
      if (!cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

const found = circles();
if (found.length === 0) {
  console.log(`no import circles under ${shown(root)} (${files.length} files)`);
  process.exit(0);
}
console.log(`${found.length} import circle${found.length === 1 ? '' : 's'} under ${shown(root)}:`);
for (const [i, component] of found.entries()) {
  console.log(`\n${i + 1}. ${component.length} files:`);
  for (const file of component) console.log(`   ${shown(file)}`);
  console.log(`   a loop: ${loopThrough(component).map(shown).join(' -> ')}`);
}
process.exit(1);
