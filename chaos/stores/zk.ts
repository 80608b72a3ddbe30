import zookeeper from 'node-zookeeper-client';
import { ZooKeeperEnsemble } from '../../src/testing/index.js';
import { memberKill, ProxySet, storeRestart, type ChaosStore } from './types.js';

/** A 3-member ZooKeeper ensemble; each candidate reaches every member through its own proxy. */
export class ZkStore implements ChaosStore {
  readonly backend = 'zk';
  readonly name = '/chaos/leader';
  readonly #ensemble = new ZooKeeperEnsemble();
  readonly #proxies = new ProxySet();
  readonly faults = [memberKill(() => this.#ensemble.members), storeRestart('cluster-restart', (hard) => this.#ensemble.restart({ hard }))];

  async start(slots: number): Promise<void> {
    await this.#ensemble.start();
    await this.#proxies.start(slots, this.#ensemble.members.map((m) => m.port));
  }

  endpoints(slot: number) {
    return { backend: 'zk' as const, connectionString: this.#proxies.of(slot).map((p) => p.address).join(',') };
  }

  proxies(slot: number) {
    return this.#proxies.of(slot);
  }

  async heal(): Promise<void> {
    this.#proxies.healAll();
    await this.#ensemble.start();
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
      const nodes = await new Promise<string[]>((resolve, reject) =>
        client.getChildren(this.name, (e, ch) => (e ? ((e as { getCode?: () => number }).getCode?.() === zookeeper.Exception.NO_NODE ? resolve([]) : reject(e)) : resolve(ch))),
      );
      return nodes.map((n) => `znode ${this.name}/${n}`);
    } finally {
      client.close();
    }
  }

  async stop(): Promise<void> {
    await this.#proxies.stop();
    await this.#ensemble.stop();
  }
}
