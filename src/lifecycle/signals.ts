import { constants } from 'node:os';
import { ConfigError } from '../core/errors.js';
import { requireFunction, requireOptions } from '../core/validate.js';
import type { LeadershipManager } from './manager.js';
import type { ShardManager } from './shards.js';

/** Options of {@link shutdownOnSignals}. */
export interface ShutdownOptions {
  /** @default ['SIGTERM', 'SIGINT'] */
  signals?: NodeJS.Signals[];
  /** Called to end the process. @default process.exit */
  exit?: (code: number) => void;
}

/**
 * For daemons: on the first SIGTERM/SIGINT, close the managers (each resigns: its term's signal
 * aborts, its work drains, its lease is released, `onDemoted` runs; a ShardManager leaves its
 * group and does so for every shard it holds) and exit 0; a second signal exits 1 at once.
 * Returns a function that removes the handlers.
 */
export function shutdownOnSignals(managers: LeadershipManager | ShardManager | (LeadershipManager | ShardManager)[], options?: ShutdownOptions): () => void {
  const list = Array.isArray(managers) ? managers : [managers];
  if (list.length === 0 || list.some((m) => !m || typeof (m as { close?: unknown }).close !== 'function')) throw new ConfigError('managers', 'must be a LeadershipManager or ShardManager, or a non-empty list of them');
  const o = requireOptions('options', options, { signals: true, exit: true });
  const signals = o.signals ?? ['SIGTERM', 'SIGINT'];
  if (!Array.isArray(signals) || signals.length === 0 || signals.some((s) => typeof s !== 'string' || !(s in constants.signals))) {
    throw new ConfigError('signals', `must be a non-empty list of signal names such as 'SIGTERM', got ${JSON.stringify(signals)}`);
  }
  const exit = o.exit === undefined ? (code: number) => process.exit(code) : requireFunction<(code: number) => void>('exit', o.exit);
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
