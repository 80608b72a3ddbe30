import { Etcd3 } from 'etcd3';
import { EtcdCluster, type FaultProxy } from '../../src/testing/index.js';
import { memberKill, ProxiedStore, storeRestart } from './types.js';

/** A 3-member etcd cluster; each candidate reaches every member through its own proxy. */
export class EtcdStore extends ProxiedStore {
  readonly backend = 'etcd';
  readonly name = 'chaos/leader';
  readonly #cluster: EtcdCluster;
  readonly faults;

  constructor(cluster = new EtcdCluster()) {
    super(cluster);
    this.#cluster = cluster;
    this.faults = [memberKill(() => cluster.members), storeRestart('cluster-restart', (hard) => cluster.restart({ hard }))];
  }

  protected ports(): number[] {
    return this.#cluster.members.map((m) => m.clientPort);
  }

  protected via(proxies: readonly FaultProxy[]) {
    return { backend: 'etcd' as const, hosts: proxies.map((p) => `http://${p.address}`) };
  }

  override async heal(): Promise<void> {
    await super.heal();
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
}
