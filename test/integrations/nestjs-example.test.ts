import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StaleFenceError } from '../../src/index.js';
import { RedisFencedResource } from '../../src/recipes/redis/index.js';
import { EtcdServer, RedisServer } from '../../src/testing/index.js';
import { exited, runExample, type Line } from '../helpers/example.js';
import { pollValue } from '../helpers/wait.js';

/**
 * examples/nestjs (issue 23) as users run it: copies of the Nest application as child processes,
 * the election on a real etcd and on a real Redis, the ledger in Redis. The leader SIGKILLed: the
 * next copy leads after the TTL with a higher fence, and a write with the dead leader's fence is
 * refused. The leader SIGTERMed: Nest's shutdown hooks end its term (drain, release) and it exits
 * 0, and the next copy leads well inside the TTL.
 */
const example = new URL('../../examples/nestjs/main.ts', import.meta.url).pathname;
const TTL_MS = 3000;
let etcd: EtcdServer;
let redisServer: RedisServer;
let redis: Redis;
beforeAll(async () => {
  [etcd, redisServer] = await Promise.all([new EtcdServer().start(), new RedisServer().start()]);
  redis = new Redis({ port: redisServer.port });
});
afterAll(async () => {
  redis?.disconnect();
  await Promise.all([etcd?.stop(), redisServer?.stop()]);
});

const find = (c: { lines: Line[] }, event: string, from = 0): Line | undefined => c.lines.slice(from).find((l) => l.event === event);
const ms = (from: Line, to: Line): number => Number(BigInt(to.t as string) - BigInt(from.t as string)) / 1e6;

describe.each(['etcd', 'redis'] as const)('examples/nestjs on %s', (backend) => {
  it('SIGKILL: the next copy leads after the TTL with a higher fence and the dead leader\'s fence is refused; SIGTERM: the term drains, the lease is released, the process exits 0 and the next copy leads at once', async () => {
    const name = `nest-${backend}-${process.pid}`;
    const store = backend === 'etcd' ? etcd.endpoints[0]! : `redis://127.0.0.1:${redisServer.port}`;
    const start = () => runExample(example, [backend, store, `redis://127.0.0.1:${redisServer.port}`, name, String(TTL_MS)]);
    const copies = [start(), start()];
    try {
      const first = await pollValue(async () => copies.find((c) => find(c, 'wrote')), 60_000);
      const second = copies.find((c) => c !== first)!;
      await pollValue(async () => find(second, 'started'), 60_000);
      const fence1 = BigInt(find(first, 'elected')!.fence!);

      first.child.kill('SIGKILL');
      const elected2 = await pollValue(async () => find(second, 'elected'), TTL_MS + 10_000);
      const fence2 = BigInt(elected2.fence!);
      expect(fence2).toBeGreaterThan(fence1);
      await pollValue(async () => find(second, 'wrote'), 10_000);
      // The ledger's fence has risen: a write that still carries the dead leader's fence is refused.
      const ledger = new RedisFencedResource(redis, `ledger:${name}:fence`);
      const stale = await ledger.write(fence1, (w) => w.rpush(`ledger:${name}:entries`, 'stale')).catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(StaleFenceError);
      expect((stale as StaleFenceError).highest).toBe(fence2);

      const third = start();
      copies.push(third);
      await pollValue(async () => find(third, 'started'), 60_000);
      expect(find(third, 'elected')).toBeUndefined();
      const from = second.lines.length;
      second.child.kill('SIGTERM');
      expect(await exited(second.child)).toBe(0);
      const demoted = find(second, 'demoted', from)!;
      expect(demoted.reason).toBe('closed');
      expect(second.lines.at(-1)!.event).toBe('stopped');
      expect(second.lines.slice(second.lines.indexOf(demoted)).some((l) => l.event === 'wrote')).toBe(false); // drained before the demotion
      // Released, not expired: the next copy leads well inside the TTL (a bound, not a stopwatch).
      const elected3 = await pollValue(async () => find(third, 'elected'), TTL_MS - 1000);
      const fence3 = BigInt(elected3.fence!);
      expect(fence3).toBeGreaterThan(fence2);
      await pollValue(async () => find(third, 'wrote'), 10_000);
      const handoff = ms(demoted, elected3);
      console.log(`[examples/nestjs ${backend}] SIGKILL hand-off ${ms(first.lines.at(-1)!, elected2).toFixed(0)} ms after the killed leader's last line seen (TTL ${TTL_MS} ms); SIGTERM: demoted → next elected ${handoff.toFixed(0)} ms`);
      third.child.kill('SIGTERM');
      expect(await exited(third.child)).toBe(0);

      // The ledger in the order written: fences never go down; nothing of a term after a later one's first entry.
      const entries = (await redis.lrange(`ledger:${name}:entries`, 0, -1)).map((e) => ({ id: e.split(' ')[0]!, fence: BigInt(e.split(' ')[1]!) }));
      expect(entries.length).toBeGreaterThan(3);
      for (let i = 1; i < entries.length; i++) expect(entries[i]!.fence).toBeGreaterThanOrEqual(entries[i - 1]!.fence);
      expect(new Set(entries.map((e) => e.fence))).toEqual(new Set([fence1, fence2, fence3]));
      expect(new Set(entries.map((e) => e.id)).size).toBe(3);
    } finally {
      for (const c of copies) c.child.kill('SIGKILL');
    }
  }, 120_000);
});
