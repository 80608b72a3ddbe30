import { describe, expect, it, vi } from 'vitest';
import { BusyError, ClosedError, type Lease } from '../../src/index.js';
import { LeaseCandidate, type LeaseCandidateInit } from '../../src/core/lease-candidate.js';
import { LeaseController } from '../../src/core/lease.js';

const candidate = (acquire: LeaseCandidateInit['acquire'], close?: () => Promise<void>) =>
  new LeaseCandidate({ id: 'me', name: 'n', what: 'test election', acquire, leader: async () => undefined, observe: async function* () {}, close });

/** An acquirer that hands out leases when told to, to test the candidate's own contract. */
function gate() {
  const waiting: { resolve: (l: Lease) => void; reject: (e: unknown) => void; signal: AbortSignal }[] = [];
  const released = vi.fn();
  let fence = 0n;
  const acquire = (signal: AbortSignal) =>
    new Promise<Lease>((resolve, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      waiting.push({ resolve, reject, signal });
    });
  const grant = () => {
    const w = waiting.shift()!;
    w.resolve(new LeaseController({ name: 'n', fence: ++fence, release: async () => released() }).lease);
  };
  return { acquire, grant, released, waiting };
}

describe('LeaseCandidate', () => {
  it('returns the live term again instead of acquiring twice, and campaigns anew after resign', async () => {
    const g = gate();
    const c = candidate(g.acquire);
    const p = c.campaign();
    g.grant();
    const t1 = await p;
    expect(await c.campaign()).toBe(t1);
    await c.resign();
    expect(t1.signal.aborted).toBe(true);
    const p2 = c.campaign();
    g.grant();
    expect((await p2).fence).toBeGreaterThan(t1.fence);
  });

  it('close() aborts a campaign in flight with ClosedError and calls onClose', async () => {
    const g = gate();
    const onClose = vi.fn(async () => undefined);
    const c = candidate(g.acquire, onClose);
    const p = c.campaign();
    await c.close();
    await expect(p).rejects.toBeInstanceOf(ClosedError);
    await expect(c.campaign()).rejects.toBeInstanceOf(ClosedError);
    expect(onClose).toHaveBeenCalledTimes(1);
  });

  it("a lease won after the caller's signal aborted is released, not leaked", async () => {
    const acquire = async (signal: AbortSignal) => {
      const lease = new LeaseController({ name: 'n', fence: 1n, release: async () => released() }).lease;
      controller.abort(new Error('gave up')); // the caller gives up just as the lease arrives
      void signal;
      return lease;
    };
    const released = vi.fn();
    const controller = new AbortController();
    const c = candidate(acquire);
    await expect(c.campaign({ signal: controller.signal })).rejects.toThrow('gave up');
    expect(released).toHaveBeenCalledTimes(1);
    expect(c.term).toBeUndefined();
  });

  it('refuses a second campaign while one is in flight', async () => {
    const g = gate();
    const c = candidate(g.acquire);
    const p = c.campaign();
    await expect(c.campaign()).rejects.toBeInstanceOf(BusyError);
    g.grant();
    await p;
    await c.close();
  });

  it('a campaign that times out leaves nothing waiting', async () => {
    const g = gate();
    const c = candidate(g.acquire);
    await expect(c.campaign({ timeoutMs: 20 })).rejects.toMatchObject({ code: 'ACQUIRE_TIMEOUT' });
    expect(g.waiting[0]?.signal.aborted).toBe(true);
  });
});
