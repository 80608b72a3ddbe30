import { reapOrphans } from '../src/testing/registry.js';

/**
 * Before the suite: end anything an earlier, killed run left behind.
 * After it: every test worker has exited, so any recorded server process or temp dir still
 * around is a leak. Reap it and fail the run, naming what leaked.
 */
export function setup(): void {
  reapOrphans();
}

export function teardown(): void {
  const leaked = reapOrphans();
  if (leaked.killed.length > 0 || leaked.removedDirs.length > 0) {
    // Vitest 4 prints a global teardown's error ("error during close") but still exits 0: the
    // exit code is what fails the run.
    process.exitCode = 1;
    throw new Error(
      `test suite left resources behind (now cleaned up): ${JSON.stringify(leaked, null, 2)}`,
    );
  }
}
