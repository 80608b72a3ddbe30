import { ConfigError } from '../src/index.js';
import { optionalBoolean, optionalNumber, requireOptions } from '../src/core/validate.js';
import { BACKENDS, type Backend } from './stores/index.js';
import { WORKLOAD_KINDS, type WorkloadKind } from './worker/kind.js';

export interface ChaosOptions {
  backend: Backend;
  /** What the candidates run: the recipe loop, a LeadershipManager over the same candidate, or a ShardManager (one election per shard). @default 'recipe' */
  kind?: WorkloadKind;
  /** The shard kind's number of shards. @default 1024 */
  shards?: number;
  /** How long the nemesis runs, ms. @default 60000 */
  durationMs?: number;
  /** Seeds every random choice (printed with the results). @default a random one */
  seed?: number;
  /** Candidate processes on the one name. @default 5 */
  candidates?: number;
  /**
   * TTL / session timeout of every lease, ms (a multiple of 1000: etcd's unit). @default 2000; 5000
   * for the shard kind: 1,024 shards over five processes on two shared cores, a process starting
   * hundreds of campaigns at once lagged its event loop past a 2 s lease's 1.5 s (etcd, Postgres)
   */
  ttlMs?: number;
  /** The holders' safety margin, ms. @default ttlMs / 4 */
  marginMs?: number;
  /** Longest allowed time from a holder's crash to the next grant, ms. @default ttlMs + 3000 */
  failoverBoundMs?: number;
  /** Writes skip the fence check: the checker must find violations. @default false */
  bypassFencing?: boolean;
  /** Chance that a fault on a candidate hits the current holder. @default 0.75 */
  aimAtHolder?: number;
  /** Only these fault kinds. @default all the backend offers */
  faults?: string[];
  /** Where to write the JSON history. @default none */
  historyFile?: string;
  /** Progress lines. @default silent */
  log?: (line: string) => void;
}

export type ChaosConfig = Required<Omit<ChaosOptions, 'faults' | 'historyFile' | 'log'>> & Pick<ChaosOptions, 'faults' | 'historyFile' | 'log'>;

/** Validates a run's options, naming the field of the first problem. */
export function chaosConfig(options: ChaosOptions): ChaosConfig {
  const o = requireOptions('options', options, {
    backend: true, kind: true, shards: true, durationMs: true, seed: true, candidates: true, ttlMs: true, marginMs: true,
    failoverBoundMs: true, bypassFencing: true, aimAtHolder: true, faults: true, historyFile: true, log: true,
  });
  if (!BACKENDS.includes(o.backend)) throw new ConfigError('backend', `must be one of ${BACKENDS.join(', ')}, got ${String(o.backend)}`);
  if (o.kind !== undefined && !WORKLOAD_KINDS.includes(o.kind)) throw new ConfigError('kind', `must be one of ${WORKLOAD_KINDS.join(', ')}, got ${String(o.kind)}`);
  const ttlMs = optionalNumber('ttlMs', o.ttlMs, o.kind === 'shards' ? 5000 : 2000, { integer: true, min: 1000, max: 60_000 });
  if (ttlMs % 1000 !== 0) throw new ConfigError('ttlMs', `must be a multiple of 1000 (etcd leases are in seconds), got ${ttlMs}`);
  const marginMs = optionalNumber('marginMs', o.marginMs, ttlMs / 4, { min: 1, max: ttlMs / 2 });
  if (o.faults !== undefined && (!Array.isArray(o.faults) || o.faults.length === 0 || o.faults.some((f) => typeof f !== 'string'))) {
    throw new ConfigError('faults', 'must be a non-empty list of fault kinds');
  }
  return {
    backend: o.backend,
    kind: o.kind ?? 'recipe',
    shards: optionalNumber('shards', o.shards, 1024, { integer: true, min: 1, max: 65_536 }),
    durationMs: optionalNumber('durationMs', o.durationMs, 60_000, { min: 1000 }),
    seed: optionalNumber('seed', o.seed, Math.floor(Math.random() * 2 ** 31), { integer: true, min: 0, max: 2 ** 32 - 1 }),
    candidates: optionalNumber('candidates', o.candidates, 5, { integer: true, min: 2, max: 20 }),
    ttlMs,
    marginMs,
    failoverBoundMs: optionalNumber('failoverBoundMs', o.failoverBoundMs, ttlMs + 3000, { min: ttlMs }),
    bypassFencing: optionalBoolean('bypassFencing', o.bypassFencing, false),
    aimAtHolder: optionalNumber('aimAtHolder', o.aimAtHolder, 0.75, { min: 0, max: 1 }),
    faults: o.faults,
    historyFile: o.historyFile,
    log: o.log,
  };
}

/** `10m`, `90s`, `1m30s`, `500ms` or plain milliseconds. */
export function parseDuration(field: string, text: string): number {
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/g;
  if (/^\d+$/.test(text)) return Number(text);
  let total = 0;
  let consumed = 0;
  for (const m of text.matchAll(re)) {
    total += Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
    consumed += m[0].length;
  }
  if (consumed !== text.length || consumed === 0) throw new ConfigError(field, `must be a duration such as 10m, 90s or 1m30s, got ${JSON.stringify(text)}`);
  return total;
}
