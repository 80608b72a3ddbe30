import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { FaultProxy, RedisServer, EtcdServer, spawnWorker } from '../../src/testing/index.js';
import { tcpExchange } from '../../src/testing/net.js';
import { etcdClient, redisClient } from '../helpers/clients.js';

const ticker = new URL('./fixtures/ticker.ts', import.meta.url).pathname;

function settledWithin<T>(p: Promise<T>, ms: number): Promise<boolean> {
  return Promise.race([p.then(() => true, () => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
}

describe('pause and resume a real server', () => {
  const redis = new RedisServer();
  const etcd = new EtcdServer();
  beforeAll(async () => {
    await Promise.all([redis.start(), etcd.start()]);
  });
  afterAll(async () => {
    await Promise.all([redis.stop(), etcd.stop()]);
  });

  it('a paused Redis stops answering and answers again after resume', async () => {
    const c = redisClient(redis.port, { commandTimeout: 30_000 });
    await c.connect();
    try {
      await redis.pause();
      expect(redis.paused).toBe(true);
      const pending = c.ping();
      expect(await settledWithin(pending, 400)).toBe(false);
      await expect(tcpExchange(redis.port, 'PING\r\n', { timeoutMs: 300, until: (r) => r.includes('\r\n') })).rejects.toThrow();
      await redis.resume();
      expect(await pending).toBe('PONG');
    } finally {
      c.disconnect();
    }
  });

  it('a paused etcd stops answering and answers again after resume', async () => {
    const c = etcdClient(etcd.endpoints);
    try {
      await c.put('k').value('v');
      await etcd.pause();
      const pending = c.get('k').string();
      expect(await settledWithin(pending, 400)).toBe(false);
      await etcd.resume();
      expect(await pending).toBe('v');
    } finally {
      c.close();
    }
  });

  it('pause() resolves only once the server has stopped: a request sent right after it is never answered while paused (40 rounds)', async () => {
    // kill(2) returns when SIGSTOP is queued; a thread running on the other core can still
    // answer until the stop takes effect (without the wait, 3 rounds in 150 were answered).
    const c = etcdClient(etcd.endpoints);
    try {
      let answered = 0;
      for (let i = 0; i < 40; i++) {
        await c.put('k').value(`v${i}`);
        await etcd.pause();
        const pending = c.get('k').string();
        if (await settledWithin(pending, 50)) answered++;
        await etcd.resume();
        expect(await pending).toBe(`v${i}`);
      }
      expect(answered).toBe(0);
    } finally {
      c.close();
    }
  });
});

describe('FaultProxy in front of a real Redis', () => {
  const redis = new RedisServer();
  let proxy: FaultProxy;
  beforeAll(async () => {
    await redis.start();
    proxy = await new FaultProxy({ target: { port: redis.port } }).start();
  });
  afterAll(async () => {
    await proxy.stop();
    await redis.stop();
  });

  it('forwards a real client transparently', async () => {
    const c = redisClient(proxy.port);
    await c.connect();
    await c.set('through', 'proxy');
    expect(await c.get('through')).toBe('proxy');
    expect(proxy.connections).toBe(1);
    c.disconnect();
  });

  it('delay(ms) adds at least that latency in each direction', async () => {
    const c = redisClient(proxy.port);
    await c.connect();
    try {
      proxy.delay(150);
      const t = performance.now();
      expect(await c.ping()).toBe('PONG');
      expect(performance.now() - t).toBeGreaterThanOrEqual(290); // a lower bound: delay is guaranteed
    } finally {
      proxy.heal();
      c.disconnect();
    }
  });

  it('blackhole() forwards nothing (like a partition) and heal() delivers what was held', async () => {
    const c = redisClient(proxy.port, { commandTimeout: 30_000 });
    await c.connect();
    try {
      proxy.blackhole();
      const pending = c.set('partitioned', 'late');
      expect(await settledWithin(pending, 500)).toBe(false);
      // The write has not reached the server either.
      const direct = redisClient(redis.port);
      await direct.connect();
      expect(await direct.get('partitioned')).toBeNull();
      // A new connection is accepted but answered by nobody.
      expect(await settledWithin(tcpExchange(proxy.port, 'PING\r\n', { timeoutMs: 300, until: (r) => r.includes('\r\n') }), 1000)).toBe(true);
      proxy.heal();
      expect(await pending).toBe('OK');
      expect(await direct.get('partitioned')).toBe('late');
      direct.disconnect();
    } finally {
      proxy.heal();
      c.disconnect();
    }
  });

  it('cut() resets every open connection; the client reconnects and works', async () => {
    const c = redisClient(proxy.port, { maxRetriesPerRequest: 3 });
    const errors: string[] = [];
    c.on('error', (e: NodeJS.ErrnoException) => errors.push(e.code ?? e.message));
    await c.connect();
    await c.set('before-cut', '1');
    const raw = connect({ host: '127.0.0.1', port: proxy.port });
    const rawError = new Promise<string>((resolve) => raw.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? '')));
    await new Promise((r) => raw.once('connect', r));
    await new Promise((r) => setTimeout(r, 50));
    const before = proxy.accepted;
    proxy.cut();
    expect(await rawError).toBe('ECONNRESET');
    expect(await c.get('before-cut')).toBe('1'); // ioredis reconnected through the proxy
    expect(proxy.accepted).toBeGreaterThan(before);
    expect(errors).toContain('ECONNRESET');
    c.disconnect();
    raw.destroy();
  });
});

describe('workers in separate processes', () => {
  it('report events stamped on the shared monotonic clock and answer messages', async () => {
    const before = process.hrtime.bigint();
    const w = await spawnWorker(ticker, ['a', 'b']);
    try {
      const ready = await w.waitFor<{ argv: string[] }>('ready');
      expect(ready.data.argv).toEqual(['a', 'b']);
      expect(ready.pid).toBe(w.pid);
      expect(ready.t).toBeGreaterThan(before);
      expect(ready.t).toBeLessThan(process.hrtime.bigint());
      w.send({ type: 'echo', payload: 42 });
      expect((await w.waitFor<{ payload: number }>('echo')).data.payload).toBe(42);
    } finally {
      await w.stop();
    }
  });

  it('a SIGSTOPped worker reports nothing until SIGCONT, and its next stamp is after the resume', async () => {
    const w = await spawnWorker(ticker);
    try {
      await w.waitFor('tick');
      w.pause();
      await new Promise((r) => setTimeout(r, 100)); // let in-flight messages arrive
      const count = w.events.length;
      await new Promise((r) => setTimeout(r, 400));
      expect(w.events.length).toBe(count);
      const resumedAt = w.resume();
      const next = await w.waitFor((e) => e.type === 'tick' && e.t > resumedAt, { from: count });
      expect(next.t).toBeGreaterThan(resumedAt);
    } finally {
      await w.stop();
    }
  });

  it('a SIGKILLed worker dies at once and waitFor rejects instead of hanging', async () => {
    const w = await spawnWorker(ticker);
    await w.waitFor('ready');
    const exit = await w.kill();
    expect(exit.signal).toBe('SIGKILL');
    expect(w.running).toBe(false);
    await expect(w.waitFor('never')).rejects.toThrow(/exited/);
  });
});
