import type { Lease } from '../../src/index.js';

/**
 * The one interface between the chaos workload and what it puts under test: a candidate kind
 * says how one process campaigns on one backend. Each kind lives in its own module under
 * `kinds/`, the only place where the workload calls tenure's recipes, so an API change (or a new
 * kind, such as the lifecycle manager) touches one small file.
 */
export interface ChaosCandidate {
  /** Waits for a term; rejects with `signal.reason` when `signal` aborts. May be called again after any loss. */
  campaign(signal: AbortSignal): Promise<Lease>;
  /** Ends the live term (resign); the candidate stays usable. */
  resign(): Promise<void>;
  /** Leaves for good: ends any term, closes sessions and clients. */
  close(): Promise<void>;
}

/** Where a candidate finds its store: through its own fault proxies. */
export type StoreEndpoints =
  | { backend: 'etcd'; hosts: string[] }
  | { backend: 'zk'; connectionString: string }
  | { backend: 'redis'; host: string; port: number }
  | { backend: 'postgres'; host: string; port: number };

export interface CandidateContext {
  /** This process's name in the history (also its participant id). */
  id: string;
  /** The election's name (a path for ZooKeeper). */
  name: string;
  store: StoreEndpoints;
  /** TTL / session timeout, ms. */
  ttlMs: number;
  /** How long before the store-side expiry the holder stops, ms. */
  marginMs: number;
}

export type CandidateKind = (ctx: CandidateContext) => ChaosCandidate;
