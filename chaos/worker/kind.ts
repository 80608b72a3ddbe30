import type { Candidate, Membership } from '../../src/index.js';

/**
 * The one interface between the chaos workload and the store under test: how one process gets
 * the backend's {@link Candidate}. Each backend is one small module under `backends/`, the only
 * place where the workload calls tenure's recipes, so an API change touches one small file. What
 * is done with the candidate is the run's kind: the `recipe` loop drives it directly
 * (`recipe.ts`), the `manager` kind runs a LeadershipManager over it (`manager.ts`).
 */
export interface ChaosCandidate {
  /**
   * The candidate, made on first use (with its client and session); rejects with `signal.reason`
   * when `signal` aborts, or when the store cannot be reached yet (call it again).
   */
  open(signal: AbortSignal): Promise<Candidate>;
  /**
   * For the `shards` kind: a membership of the group `<name>/members` and a candidate factory for
   * the shards' elections `<name>/<shard>`, all on the same session or client (made on first
   * use; rejects like `open`). Each call makes a new membership (after a `leave` fault).
   */
  shards(signal: AbortSignal): Promise<ShardStore>;
  /** Leaves for good: closes the candidate (ending any term), its session and its client. */
  close(): Promise<void>;
}

/** What the `shards` kind runs a ShardManager over. */
export interface ShardStore {
  membership: Membership;
  candidate: (shard: number) => Candidate;
}

/** What the candidate processes run: the recipe loop, the lifecycle manager, or a ShardManager. */
export type WorkloadKind = 'recipe' | 'manager' | 'shards';
export const WORKLOAD_KINDS: readonly WorkloadKind[] = ['recipe', 'manager', 'shards'];

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
  /** The shard kind's number of shards. */
  shards?: number;
}

export type CandidateKind = (ctx: CandidateContext) => ChaosCandidate;
