import { Etcd3 } from 'etcd3';
import { EtcdCluster } from '../../src/testing/index.js';
import { memberKill, ProxySet, storeRestart, type ChaosStore } from './types.js';

/** A 3-member etcd cluster; each candidate reaches every member through its own proxy. */
export class EtcdStore implements ChaosStore {
  readonly backend = 'etcd';
  readonly name = 'chaos/leader';
  readonly #cluster = new EtcdCluster();
  readonly #proxies = new ProxySet();
  readonly faults = [memberKill(() => this.#cluster.members), storeRestart('cluster-restart', (hard) => this.#cluster.restart({ hard }))];

  async start(slots: number): Promise<void> {
    await this.#cluster.start();
    await this.#proxies.start(slots, this.#cluster.members.map((m) => m.clientPort));
  }

  endpoints(slot: number) {
    return { backend: 'etcd' as const, hosts: this.#proxies.of(slot).map((p) => `http://${p.address}`) };
  }

  proxies(slot: number) {
    return this.#proxies.of(slot);
  }

  async heal(): Promise<void> {
    this.#proxies.healAll();
    await this.#cluster.start();
    await this.#cluster.waitForLeader();
  }

  async leftovers(): Promise<string[]> {
    const client = new Etcd3({ hosts: this.#cluster.endpoints });
    try {
      const keys = await client.getAll().prefix(`${this.name}/`).keys();
      const leases = (await client.leaseClient.leaseLeases({})).leases ?? [];
      return [...keys.map((k) => `key ${k}`), ...leases.map((l) => `lease ${l.ID}`)];
    } finally {
      client.close();
    }
  }

  async stop(): Promise<void> {
    await this.#proxies.stop();
    await this.#cluster.stop();
  }
}
