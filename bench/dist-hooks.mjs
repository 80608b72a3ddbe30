// `node --import ./bench/dist-hooks.mjs`: a module of tenure's own `src/` (TypeScript, run through
// tsx) is loaded from its build in `dist/` instead, so the bench measures the JavaScript npm users
// run (`npm run bench` builds first). tsx compiles on load and keeps every function's name
// (`__name` on each closure); neither happens to users. Child processes inherit the flag.
import { register } from 'node:module';
import { URL } from 'node:url';
import { isMainThread } from 'node:worker_threads';

const src = new URL('../src/', import.meta.url).href;
const dist = new URL('../dist/', import.meta.url).href;

/** The module hook (it runs in the loader's own thread, where this file is imported again). */
export async function resolve(specifier, context, nextResolve) {
  const r = await nextResolve(specifier, context);
  if (r.url.startsWith(src) && r.url.endsWith('.ts')) return { ...r, url: `${dist}${r.url.slice(src.length, -3)}.js`, format: 'module' };
  return r;
}

if (isMainThread) register(import.meta.url);
