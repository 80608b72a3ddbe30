import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sleep } from '../core/abort.js';
import { monotonicClock } from '../core/clock.js';
import { ServerStartError } from '../core/errors.js';
import { optionalNumber, requireOptions } from '../core/validate.js';
import { LocalCluster } from './cluster.js';
import { freePorts } from './net.js';
import { makeTempDir } from './process.js';
import { RedisServer, type RedisServerOptions } from './redis.js';

const run = promisify(execFile);

/** Options of a {@link RedisCluster}: each member's, and the size. */
export interface RedisClusterOptions extends Omit<RedisServerOptions, 'port' | 'replicaOf'> {
  /** Number of primaries (no replicas). @default 3 */
  size?: number;
}

/**
 * A real Redis Cluster: `size` primaries (3 by default) on loopback ports, the 16384 slots split
 * between them by `redis-cli --cluster create`. Ready once every node reports `cluster_state:ok`.
 */
export class RedisCluster extends LocalCluster<RedisServer> {
  /** The members (primaries), in order. */
  readonly members: readonly RedisServer[];
  #created = false;

  constructor(options?: RedisClusterOptions) {
    const o = requireOptions('options', options, { size: true, binary: true, args: true, tls: true, aclUsers: true, adminPassword: true });
    const size = optionalNumber('size', o.size, 3, { integer: true, min: 3, max: 9 });
    const { size: _size, ...serverOptions } = o;
    new RedisServer(serverOptions); // validate member options before making anything
    super(makeTempDir('redis-cluster'));
    this.members = Array.from({ length: size }, (_, i) => {
      const dir = join(this.root, `r${i + 1}`);
      mkdirSync(dir);
      return new RedisServer(serverOptions, { name: `r${i + 1}`, dir });
    });
  }

  protected async wire(): Promise<void> {
    const ports = await freePorts(this.members.length * 2);
    this.members.forEach((m, i) => m.setPorts(ports[2 * i]!, ports[2 * i + 1]!));
  }

  /** `[{ host, port }, …]`, the startup nodes ioredis' `Cluster` takes. */
  get nodes(): {
    /** Always `127.0.0.1`. */
    host: string;
    /** The listening port. */
    port: number;
  }[] {
    return this.members.map((m) => m.endpoint);
  }

  override async start(): Promise<this> {
    await super.start();
    if (!this.#created) {
      const first = this.members[0]!;
      const args = ['--cluster', 'create', ...this.members.map((m) => `${m.host}:${m.port}`), '--cluster-replicas', '0', '--cluster-yes'];
      if (first.adminPassword !== undefined) args.unshift('--user', 'default', '--pass', first.adminPassword, '--no-auth-warning');
      try {
        await run('redis-cli', args, { timeout: 30_000 });
      } catch (e) {
        const err = e as { stdout?: string; stderr?: string };
        throw new ServerStartError('redis cluster: redis-cli --cluster create failed', `${err.stdout ?? ''}${err.stderr ?? ''}`, { cause: e });
      }
      this.#created = true;
    }
    await this.waitForState();
    return this;
  }

  /** Waits until every running member reports `cluster_state:ok`. */
  async waitForState(timeoutMs = 20_000): Promise<void> {
    const end = monotonicClock.now() + timeoutMs;
    for (;;) {
      const infos = await Promise.all(this.members.filter((m) => m.running).map((m) => m.command('CLUSTER', 'INFO').catch(() => '')));
      if (infos.every((i) => i.includes('cluster_state:ok'))) return;
      if (monotonicClock.now() > end) throw new ServerStartError(`redis cluster: not ok within ${timeoutMs} ms`, infos.join('\n'));
      await sleep(50);
    }
  }

  /** The member serving `slot`, from `CLUSTER NODES` (`<id> <ip:port@bus> <flags> … <slot ranges>`). */
  async ownerOf(slot: number): Promise<RedisServer> {
    const live = this.members.find((m) => m.running && !m.paused)!;
    for (const line of (await live.command('CLUSTER', 'NODES')).split('\n')) {
      const f = line.trim().split(' ');
      const port = Number(/:(\d+)@/.exec(f[1] ?? '')?.[1]);
      for (const range of f.slice(8)) {
        const [a, b = a] = range.split('-').map(Number);
        if (slot >= a! && slot <= b!) {
          const owner = this.members.find((m) => m.port === port);
          if (owner) return owner;
        }
      }
    }
    throw new ServerStartError(`redis cluster: no owner for slot ${slot}`, '');
  }

  /**
   * Moves `slot` from its owner to `to` the way `redis-cli --cluster reshard` does (SETSLOT
   * IMPORTING/MIGRATING, MIGRATE of each key, SETSLOT NODE on every member), so clients of the old
   * owner get MOVED.
   */
  async moveSlot(slot: number, to: RedisServer): Promise<void> {
    const from = await this.ownerOf(slot);
    if (from === to) return;
    const id = async (m: RedisServer): Promise<string> => (await m.command('CLUSTER', 'MYID')).split('\r\n')[1]!;
    const [fromId, toId] = [await id(from), await id(to)];
    await to.command('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', fromId);
    await from.command('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', toId);
    for (;;) {
      const keys = (await from.command('CLUSTER', 'GETKEYSINSLOT', String(slot), '100')).split('\r\n').filter((_, i) => i > 0 && i % 2 === 0);
      if (keys.length === 0) break;
      const auth = from.adminPassword === undefined ? [] : ['AUTH2', 'default', from.adminPassword];
      const r = await from.command('MIGRATE', to.host, String(to.port), '', '0', '5000', ...auth, 'KEYS', ...keys);
      if (!r.startsWith('+OK') && !r.startsWith('+NOKEY')) throw new ServerStartError(`redis cluster: MIGRATE failed: ${r.trim()}`, '');
    }
    for (const m of this.members) await m.command('CLUSTER', 'SETSLOT', String(slot), 'NODE', toId);
  }

  async leader(): Promise<RedisServer | undefined> {
    return this.members.find((m) => m.running && !m.paused);
  }
}
