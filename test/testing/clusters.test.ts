import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdCluster, ZooKeeperEnsemble } from '../../src/testing/index.js';
import { etcdClient, zkClient, zkCreate, zkGet } from '../helpers/clients.js';
import { eventually } from '../helpers/wait.js';

describe('killing one cluster member', () => {
  const ensemble = new ZooKeeperEnsemble();
  const cluster = new EtcdCluster();

  beforeAll(async () => {
    await Promise.all([ensemble.start(), cluster.start()]);
  });
  afterAll(async () => {
    await Promise.all([ensemble.stop(), cluster.stop()]);
  });

  it('etcd keeps quorum, a new member leads, writes go on, and the old leader rejoins', async () => {
    const old = await cluster.waitForLeader();
    const survivors = cluster.members.filter((m) => m !== old);
    const client = etcdClient(survivors.flatMap((m) => m.endpoints));
    try {
      await client.put('before').value('1');
      await old.kill();
      expect(old.running).toBe(false);
      const next = await cluster.waitForLeader();
      expect(next).not.toBe(old);
      expect(survivors).toContain(next);
      await eventually(async () => client.put('after').value('2'));
      expect(await client.get('before').string()).toBe('1');
      await old.start();
      const back = etcdClient(old.endpoints);
      expect(await eventually(async () => {
        const v = await back.get('after').string();
        if (v !== '2') throw new Error('not caught up');
        return v;
      })).toBe('2');
      back.close();
      expect(await cluster.leader()).toBeDefined();
    } finally {
      client.close();
    }
  });

  it('ZooKeeper keeps quorum, a new member leads, and reads and writes go on', async () => {
    const old = await ensemble.waitForLeader();
    const survivors = ensemble.members.filter((m) => m !== old);
    const client = await zkClient(survivors.map((m) => m.connectionString).join(','));
    try {
      await zkCreate(client, '/before', '1');
      await old.kill();
      const next = await ensemble.waitForLeader();
      expect(next).not.toBe(old);
      expect(survivors).toContain(next);
      await eventually(() => zkCreate(client, '/after', '2'), 15_000);
      expect(await zkGet(client, '/before')).toBe('1');
      await old.start();
      expect(await old.mode()).toBe('follower');
    } finally {
      client.close();
    }
  });

  it('a paused member is not counted as leader; the rest elect one', async () => {
    const old = await cluster.waitForLeader();
    await old.pause();
    try {
      const next = await cluster.waitForLeader();
      expect(next).not.toBe(old);
    } finally {
      await old.resume();
    }
    // once resumed, the old leader steps down and follows
    await eventually(async () => {
      const s = await old.status();
      if (s.memberId === s.leader) throw new Error('still thinks it leads');
    });
  });

  it('the whole cluster restarts and elects a leader again', async () => {
    const client = etcdClient(cluster.endpoints);
    await client.put('whole').value('1');
    client.close();
    await cluster.restart({ hard: true });
    await cluster.waitForLeader();
    const again = etcdClient(cluster.endpoints);
    expect(await eventually(() => again.get('whole').string())).toBe('1');
    again.close();
  });
});
