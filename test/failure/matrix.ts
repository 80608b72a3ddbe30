import { describe, expect, it } from 'vitest';
import { FaultProxy, freePort, spawnWorker, type WorkerEvent } from '../../src/testing/index.js';

/**
 * The failure matrix (issue 9): for one backend, every operation against a store that is down
 * (closed port), blackholed (a FaultProxy that forwards nothing), SIGKILLed mid-hold and
 * SIGSTOPped mid-hold. Each row runs in its own process (fixtures/probe.ts) and must
 *   - settle every call within its bound plus slack, with a named, retryable tenure error;
 *   - end every held lease (its signal aborts with a reason) within the TTL plus slack;
 *   - then exit by itself: nothing (timer, socket, reconnect loop) may keep it alive.
 * The probe runs every bound at 2000 ms (callTimeoutMs / connectTimeoutMs / ttlMs).
 */
export interface MatrixServer {
  /** `host:port` of the store. */
  endpoint(): string;
  port(): number;
  pause(): Promise<void>;
  resume(): Promise<void>;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

type Result = { op: string; code: string; reason?: string; ms: number; message?: string };

/** Longest a call may take: its 2000 ms bound, a failed attempt before it, and slack for a loaded 2-core machine. */
const CALL_MAX_MS = 9000;
/** Longest a held lease may outlive its store: the 2000 ms TTL plus slack. */
const LOSS_MAX_MS = 7000;
const STORE_DOWN = ['STORE_UNAVAILABLE', 'SESSION_EXPIRED'];
const LOSS_REASONS = ['deadline', 'renew-failed', 'suspended', 'session-lost', 'connection-lost', 'expired'];

async function runRow(backend: string, fault: string, endpoint: string, during?: () => Promise<void>): Promise<Result[]> {
  const w = await spawnWorker(new URL('./fixtures/probe.ts', import.meta.url).pathname, [], { env: { PLAN: JSON.stringify({ backend, fault, endpoint }) } });
  try {
    if (during) {
      await w.waitFor('ready', { timeoutMs: 30_000 });
      await during();
      w.send({ cmd: 'go' });
    }
    await w.waitFor('done', { timeoutMs: 60_000 });
    // It must exit on its own: nothing it opened may hold the event loop.
    const exit = await Promise.race([w.exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 15_000))]);
    expect(exit, `${backend}/${fault}: the probe is still alive after closing everything (a handle leaked)`).toBeDefined();
    expect(exit!.code, `${backend}/${fault}: probe exit`).toBe(0);
    return w.events.filter((e: WorkerEvent) => e.type === 'result').map((e) => e.data as Result);
  } finally {
    await w.kill().catch(() => undefined);
  }
}

function expectCalls(results: Result[], ops: string[], codes = STORE_DOWN): void {
  for (const op of ops) {
    const r = results.find((x) => x.op === op);
    expect(r, `no result for ${op}`).toBeDefined();
    expect(codes, `${op}: ${r!.code} ${r!.message ?? ''}`).toContain(r!.code);
    expect(r!.ms, `${op} took ${Math.round(r!.ms)} ms`).toBeLessThan(CALL_MAX_MS);
  }
}

function expectLosses(results: Result[]): void {
  for (const op of ['lock-held', 'term-held']) {
    const r = results.find((x) => x.op === op);
    expect(r?.code, op).toBe('LOST');
    expect(LOSS_REASONS, `${op}: ${r!.reason}`).toContain(r!.reason);
    expect(r!.ms, `${op} ended ${Math.round(r!.ms)} ms after the fault`).toBeLessThan(LOSS_MAX_MS);
  }
}

export function failureMatrix(backend: 'etcd' | 'zk' | 'redis' | 'postgres', start: () => Promise<MatrixServer>, ops: { down: string[]; blackhole: string[]; afterFault: string[] }): void {
  describe(`failure matrix: ${backend}`, () => {
    it('a closed port: every call settles within its bound with a retryable StoreUnavailableError, and the process exits', async () => {
      const results = await runRow(backend, 'closed', `127.0.0.1:${await freePort()}`);
      expectCalls(results, ops.down, ['STORE_UNAVAILABLE']);
    });

    it('a blackholed link: every call settles within its bound, held leases end within the TTL, the process exits', async () => {
      const server = await start();
      const proxy = await new FaultProxy({ target: { port: server.port() } }).start();
      try {
        const results = await runRow(backend, 'blackhole', proxy.address, async () => proxy.blackhole());
        expectCalls(results, ops.blackhole);
        expectLosses(results);
        expectCalls(results, ['release'], ['OK', ...STORE_DOWN]);
      } finally {
        await proxy.stop();
        await server.stop();
      }
    });

    it('the server SIGSTOPped mid-hold: held leases end within the TTL, later calls are bounded, the process exits', async () => {
      const server = await start();
      try {
        const results = await runRow(backend, 'stop', server.endpoint(), () => server.pause());
        expectLosses(results);
        expectCalls(results, ['release'], ['OK', ...STORE_DOWN]);
        expectCalls(results, ops.afterFault);
      } finally {
        await server.resume().catch(() => undefined);
        await server.stop();
      }
    });

    it('the server SIGKILLed mid-hold: held leases end within the TTL, later calls are bounded, the process exits', async () => {
      const server = await start();
      try {
        const results = await runRow(backend, 'kill', server.endpoint(), () => server.kill());
        expectLosses(results);
        expectCalls(results, ['release'], ['OK', ...STORE_DOWN]);
        expectCalls(results, ops.afterFault);
      } finally {
        await server.stop();
      }
    });
  });
}
