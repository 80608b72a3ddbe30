import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The heap in use after a forced GC, in bytes (for "heap per participant" figures). */
export function heapAfterGc(): number {
  gc();
  return process.memoryUsage().heapUsed;
}
