import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdServer, ZooKeeperServer } from '../../src/testing/index.js';
import { exited, runExample } from '../helpers/example.js';
import { pollValue } from '../helpers/wait.js';

/**
 * The runnable active-passive daemon (examples/active-passive), as a user runs it: two copies on
 * a real etcd and a real ZooKeeper. One is active; SIGKILL it and the other takes over with a
 * higher fence; SIGTERM the new active one and it resigns (drained, passive, exit 0).
 */
const daemon = new URL('../../examples/active-passive/daemon.ts', import.meta.url).pathname;

const run = (args: string[]) => runExample(daemon, args);

let etcd: EtcdServer;
let zk: ZooKeeperServer;
beforeAll(async () => {
  [etcd, zk] = await Promise.all([new EtcdServer().start(), new ZooKeeperServer().start()]);
});
afterAll(async () => {
  await Promise.all([etcd?.stop(), zk?.stop()]);
});

describe('examples/active-passive', () => {
  for (const backend of ['etcd', 'zk'] as const) {
    it(`${backend}: one copy is active, the other takes over when it is killed, and a SIGTERMed copy resigns cleanly`, async () => {
      const endpoint = backend === 'etcd' ? etcd.endpoints[0]! : zk.connectionString;
      const service = `svc-${backend}-${process.pid}`;
      const a = run([backend, endpoint, service]);
      await pollValue(async () => (a.lines.some((l) => l.event === 'active') ? true : undefined), 30_000);
      const b = run([backend, endpoint, service]);
      try {
        await pollValue(async () => (b.lines.some((l) => l.event === 'started') ? true : undefined), 30_000);
        await new Promise((r) => setTimeout(r, 1000));
        expect(b.lines.some((l) => l.event === 'active')).toBe(false); // passive while a is active
        expect(b.lines.some((l) => l.event === 'leader' && l.id === b.lines[0]!.id && (l as { leader?: string }).leader === a.lines[0]!.id)).toBe(true);
        const aFence = BigInt(a.lines.find((l) => l.event === 'active')!.fence!);
        a.child.kill('SIGKILL');
        await pollValue(async () => (b.lines.some((l) => l.event === 'active') ? true : undefined), 30_000);
        expect(BigInt(b.lines.find((l) => l.event === 'active')!.fence!)).toBeGreaterThan(aFence);
        b.child.kill('SIGTERM');
        expect(await exited(b.child)).toBe(0);
        const passive = b.lines.find((l) => l.event === 'passive');
        expect(passive?.reason).toBe('closed');
        // Its last unit of work came before it went passive.
        expect(b.lines.findLastIndex((l) => l.event === 'work')).toBeLessThan(b.lines.indexOf(passive!));
      } finally {
        a.child.kill('SIGKILL');
        b.child.kill('SIGKILL');
      }
    }, 90_000);
  }
});
