import type { LeadershipManager } from './manager.js';

export interface ShutdownOptions {
  /** @default ['SIGTERM', 'SIGINT'] */
  signals?: NodeJS.Signals[];
  /** Called to end the process. @default process.exit */
  exit?: (code: number) => void;
}

/**
 * For daemons: on the first SIGTERM/SIGINT, close the managers (each resigns: its term's signal
 * aborts, its work drains, its lease is released, `onDemoted` runs) and exit 0; a second signal
 * exits 1 at once. Returns a function that removes the handlers.
 */
export function shutdownOnSignals(managers: LeadershipManager | LeadershipManager[], options: ShutdownOptions = {}): () => void {
  const list = Array.isArray(managers) ? managers : [managers];
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let shuttingDown = false;
  const handler = (): void => {
    if (shuttingDown) return exit(1);
    shuttingDown = true;
    void Promise.allSettled(list.map((m) => m.close())).then(() => exit(0));
  };
  for (const s of signals) process.on(s, handler);
  return () => {
    for (const s of signals) process.off(s, handler);
  };
}
