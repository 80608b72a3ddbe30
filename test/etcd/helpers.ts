import { afterAll, afterEach, beforeAll } from 'vitest';
import { randomBytes } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import { newEtcdClient } from '../../src/recipes/etcd/client.js';
import { EtcdServer } from '../../src/testing/index.js';
import { loadEtcd3 } from '../../src/recipes/etcd/peer.js';
import { EtcdSession, type EtcdSessionOptions } from '../../src/recipes/etcd/session.js';

/** Test timing constants in one place (a loaded 2-core machine: generous bounds). */
export const TTL = 2;
/** How long after a TTL the server may take to expire a lease (etcd checks expiry every ~500 ms). */
export const EXPIRY_SLACK_MS = 1500;

/** A fresh name per test, so tests share a server but never keys. */
export function uniqueName(base: string): string {
  return `t/${base}-${randomBytes(4).toString('hex')}`;
}

// The pool makes clients synchronously (newEtcdClient), so the client package is loaded up front.
await loadEtcd3();

/** Sessions and clients a test made, closed in afterEach. */
export class Pool {
  readonly sessions: EtcdSession[] = [];
  readonly clients: Etcd3[] = [];

  constructor(private readonly endpoints: () => string[]) {}

  client(hosts: string[] = this.endpoints()): Etcd3 {
    const c = newEtcdClient({ hosts });
    this.clients.push(c);
    return c;
  }

  async session(opts: Partial<EtcdSessionOptions> = {}): Promise<EtcdSession> {
    const s = await EtcdSession.create({ ttlMs: TTL * 1000, ...(opts.client || opts.hosts ? {} : { client: this.shared() }), ...opts });
    this.sessions.push(s);
    return s;
  }

  #shared: Etcd3 | undefined;
  shared(): Etcd3 {
    this.#shared ??= this.client();
    return this.#shared;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.sessions.splice(0).map((s) => s.close().catch(() => undefined)));
    for (const c of this.clients.splice(0)) c.close();
    this.#shared = undefined;
  }
}

/**
 * One etcd server for a test file, started before its tests and stopped after them, and a
 * {@link Pool} on it whose sessions and clients are closed after each test. `server()` is the
 * running server (read it inside a test or hook).
 */
export function etcdForFile(): { server: () => EtcdServer; pool: Pool } {
  let etcd: EtcdServer | undefined;
  const server = (): EtcdServer => {
    if (!etcd) throw new Error('etcdForFile: the server starts in beforeAll; read it inside a test or hook');
    return etcd;
  };
  const pool = new Pool(() => server().endpoints);
  beforeAll(async () => {
    etcd = await new EtcdServer().start();
  });
  afterEach(() => pool.cleanup());
  afterAll(async () => {
    await etcd?.stop();
  });
  return { server, pool };
}

/** Resolves with the monotonic ms when `signal` aborts (at once if it has). */
export function abortedAt(signal: AbortSignal): Promise<number> {
  if (signal.aborted) return Promise.resolve(performance.now());
  return new Promise((r) => signal.addEventListener('abort', () => r(performance.now()), { once: true }));
}

/** Polls `cond` every 20 ms until true or `timeoutMs`. */
export async function until(cond: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!(await cond())) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** How many `method` calls (Txn, Range, Put, …) the member at `endpoint` has started, from its /metrics. */
export async function serverCalls(endpoint: string, method: string): Promise<number> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`grpc_server_started_total{grpc_method="${method}",`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}
