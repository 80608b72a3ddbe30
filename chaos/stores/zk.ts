import zookeeper from 'node-zookeeper-client';
import { ZooKeeperEnsemble, type FaultProxy } from '../../src/testing/index.js';
import { memberKill, ProxiedStore, storeRestart } from './types.js';

/** A 3-member ZooKeeper ensemble; each candidate reaches every member through its own proxy. */
export class ZkStore extends ProxiedStore {
  readonly backend = 'zk';
  readonly name = '/chaos/leader';
  readonly #ensemble: ZooKeeperEnsemble;
  readonly faults;

  constructor(ensemble = new ZooKeeperEnsemble()) {
    super(ensemble);
    this.#ensemble = ensemble;
    this.faults = [memberKill(() => ensemble.members), storeRestart('cluster-restart', (hard) => ensemble.restart({ hard }))];
  }

  protected ports(): number[] {
    return this.#ensemble.members.map((m) => m.port);
  }

  protected via(proxies: readonly FaultProxy[]) {
    return { backend: 'zk' as const, connectionString: proxies.map((p) => p.address).join(',') };
  }

  override async heal(): Promise<void> {
    await super.heal();
    await this.#ensemble.waitForLeader();
  }

  async leftovers(): Promise<string[]> {
    const client = zookeeper.createClient(this.#ensemble.connectionString, { sessionTimeout: 10_000, retries: 0 });
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('zk: no connection for the leak check')), 15_000);
        client.once('connected', () => {
          clearTimeout(timer);
          resolve();
        });
        client.connect();
      });
      const children = (path: string): Promise<string[]> =>
        new Promise<string[]>((resolve, reject) =>
          client.getChildren(path, (e, ch) => (e ? ((e as { getCode?: () => number }).getCode?.() === zookeeper.Exception.NO_NODE ? resolve([]) : reject(e)) : resolve(ch))),
        );
      const ephemeral = (path: string): Promise<boolean> =>
        new Promise((resolve, reject) => client.exists(path, (e, stat) => (e ? reject(e) : resolve(stat !== null && stat !== undefined && !(stat.ephemeralOwner as unknown as Buffer).equals(Buffer.alloc(8))))));
      // Every ephemeral node below the name: the latch's, or the shard kind's (each shard's latch, every member).
      const left: string[] = [];
      const walk = async (path: string): Promise<void> => {
        for (const c of await children(path)) {
          const p = `${path}/${c}`;
          if (await ephemeral(p)) left.push(`znode ${p}`);
          else await walk(p);
        }
      };
      await walk(this.name);
      return left;
    } finally {
      client.close();
    }
  }
}
