import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { ConfigError, StateError } from '../core/errors.js';
import { optionalNumber, optionalString, requireOptions, type OptionKeys } from '../core/validate.js';
import { freePort, freePorts, tcpExchange } from './net.js';
import { makeTempDir, type SpawnSpec } from './process.js';
import { LocalServer } from './server.js';
import { LocalCluster } from './cluster.js';

/** Options of a {@link ZooKeeperServer}. */
export interface ZooKeeperServerOptions {
  /** ZooKeeper's tick in ms; sessions may be as short as 2 ticks. @default 200 */
  tickTime?: number;
  /** @default 2 × tickTime */
  minSessionTimeout?: number;
  /** @default 60000 */
  maxSessionTimeout?: number;
  /** Classpath with the server and a logging binding. @default Debian's zookeeper.jar + slf4j-simple.jar */
  classpath?: string;
  /** @default 'java' */
  java?: string;
  /**
   * Password of ZooKeeper's `super` user (digest auth `super:<password>` passes every ACL), for
   * tests that must look behind ACLs. @default none
   */
  superPassword?: string;
  /**
   * The JVM's maximum heap (`-Xmx`) in MiB. Every open session, watch and in-flight reply lives
   * there: 10,000 sessions whose joiners each list up to 10,000 children need well over the default.
   * @default 256
   */
  maxHeapMb?: number;
}

/** ZooKeeper's digest of `user:password`: base64(SHA-1(`user:password`)). */
function digestHash(user: string, password: string): string {
  return createHash('sha1').update(`${user}:${password}`).digest('base64');
}

const FOUR_LETTER_WORDS = 'ruok,srvr,mntr,stat,conf,cons,wchs,wchp,wchc,dump,isro,envi';

function defaultClasspath(): string {
  const jars = ['/usr/share/java/zookeeper.jar', '/usr/share/java/slf4j-simple.jar'];
  return jars.filter((j) => existsSync(j) || j.endsWith('zookeeper.jar')).join(':');
}

interface Peer {
  id: number;
  quorumPort: number;
  electionPort: number;
}

/** Sends a four-letter word (`srvr`, `mntr`, `wchp`, …) and returns the reply. */
export function fourLetterWord(port: number, word: string, timeoutMs = 1000): Promise<string> {
  return tcpExchange(port, word, { timeoutMs });
}

/**
 * A real ZooKeeper 3.8 server (plain java, foreground) on a loopback port. Admin server off, a
 * four-letter-word whitelist that lets tests count watches (`wchp`, `wchc`), tickTime 200 ms so
 * tests can use 2–4 s session timeouts.
 */
export class ZooKeeperServer extends LocalServer {
  readonly name: string;
  /** Always `127.0.0.1`. */
  readonly host = '127.0.0.1';
  #port: number | undefined;
  readonly #opts: Required<ZooKeeperServerOptions>;
  #peers: { self: number; all: Peer[] } | undefined;

  constructor(options?: ZooKeeperServerOptions, member?: { id: number; dir: string; port: number }) {
    super();
    const o = requireOptions('options', options, SERVER_KEYS);
    const tickTime = optionalNumber('tickTime', o.tickTime, 200, { integer: true, min: 1 });
    const minSessionTimeout = optionalNumber('minSessionTimeout', o.minSessionTimeout, 2 * tickTime, { integer: true, min: 1 });
    const maxSessionTimeout = optionalNumber('maxSessionTimeout', o.maxSessionTimeout, 60_000, { integer: true, min: 1 });
    if (maxSessionTimeout < minSessionTimeout) {
      throw new ConfigError('maxSessionTimeout', `must be at least minSessionTimeout (${minSessionTimeout}), got ${maxSessionTimeout}`);
    }
    this.#opts = {
      tickTime,
      minSessionTimeout,
      maxSessionTimeout,
      classpath: optionalString('classpath', o.classpath, defaultClasspath()),
      java: optionalString('java', o.java, 'java'),
      superPassword: optionalString('superPassword', o.superPassword, ''),
      maxHeapMb: optionalNumber('maxHeapMb', o.maxHeapMb, 256, { integer: true, min: 64 }),
    };
    this.name = member ? `zookeeper-${member.id}` : 'zookeeper';
    if (member) {
      this.useDir(member.dir);
      this.#port = member.port;
      this.portRetries = 0; // the ensemble picks ports for all members at once
    }
    this.readyTimeoutMs = 30_000;
  }

  /** @internal the ensemble wires its members together. */
  setPeers(self: number, all: Peer[], port: number): void {
    this.#peers = { self, all };
    this.#port = port;
  }

  /** The client port (after `start()`). */
  get port(): number {
    if (this.#port === undefined) throw new StateError(`${this.name}: not started`);
    return this.#port;
  }

  /** `127.0.0.1:<port>` */
  get connectionString(): string {
    return `${this.host}:${this.port}`;
  }

  /** Sends a four-letter word to this server. */
  fourLetterWord(word: string, timeoutMs = 1000): Promise<string> {
    return fourLetterWord(this.port, word, timeoutMs);
  }

  /** `leader`, `follower` or `standalone` from `srvr`; undefined when not serving. */
  async mode(): Promise<string | undefined> {
    const reply = await this.fourLetterWord('srvr', 500).catch(() => '');
    return /Mode: (\w+)/.exec(reply)?.[1];
  }

  protected async allocatePorts(): Promise<void> {
    if (!this.#peers) this.#port = await freePort();
  }

  protected override async initDataDir(dir: string): Promise<void> {
    mkdirSync(join(dir, 'data'), { recursive: true });
  }

  protected spawnSpec(dir: string): SpawnSpec {
    const o = this.#opts;
    const lines = [
      `tickTime=${o.tickTime}`,
      'initLimit=20',
      'syncLimit=5',
      `dataDir=${join(dir, 'data')}`,
      `clientPort=${this.port}`,
      `clientPortAddress=${this.host}`,
      `minSessionTimeout=${o.minSessionTimeout}`,
      `maxSessionTimeout=${o.maxSessionTimeout}`,
      'maxClientCnxns=0',
      'admin.enableServer=false',
      `4lw.commands.whitelist=${FOUR_LETTER_WORDS}`,
    ];
    if (this.#peers) {
      writeFileSync(join(dir, 'data', 'myid'), `${this.#peers.self}\n`);
      for (const p of this.#peers.all) lines.push(`server.${p.id}=127.0.0.1:${p.quorumPort}:${p.electionPort}`);
    }
    writeFileSync(join(dir, 'zoo.cfg'), `${lines.join('\n')}\n`);
    return {
      command: o.java,
      args: [
        '-Xms64m', `-Xmx${o.maxHeapMb}m`, '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-Dzookeeper.forceSync=no',
        ...(o.superPassword ? [`-Dzookeeper.DigestAuthenticationProvider.superDigest=super:${digestHash('super', o.superPassword)}`] : []),
        '-cp', o.classpath, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', join(dir, 'zoo.cfg'),
      ],
      cwd: dir,
      logFile: join(dir, 'server.log'),
    };
  }

  protected async probe(): Promise<boolean> {
    // `ruok` answers before the server serves; `srvr` shows a Mode only once it does.
    return (await this.mode()) !== undefined;
  }
}

/** Options of a {@link ZooKeeperEnsemble}: each member's, and the size. */
const SERVER_KEYS: OptionKeys<ZooKeeperServerOptions> = { tickTime: true, minSessionTimeout: true, maxSessionTimeout: true, classpath: true, java: true, superPassword: true, maxHeapMb: true };

export interface ZooKeeperEnsembleOptions extends ZooKeeperServerOptions {
  /** Number of members. @default 3 */
  size?: number;
}

/** A real ZooKeeper ensemble (3 members by default) on loopback ports. */
export class ZooKeeperEnsemble extends LocalCluster<ZooKeeperServer> {
  /** The members, in order. */
  readonly members: readonly ZooKeeperServer[];

  constructor(options?: ZooKeeperEnsembleOptions) {
    const o = requireOptions('options', options, { ...SERVER_KEYS, size: true });
    const size = optionalNumber('size', o.size, 3, { integer: true, min: 1, max: 9 });
    const { size: _size, ...serverOptions } = o;
    new ZooKeeperServer(serverOptions); // validate member options before making anything
    super(makeTempDir('zk-ensemble'));
    this.members = Array.from({ length: size }, (_, i) => {
      const dir = join(this.root, `m${i + 1}`);
      mkdirSync(dir);
      return new ZooKeeperServer(serverOptions, { id: i + 1, dir, port: 0 });
    });
  }

  protected async wire(): Promise<void> {
    const ports = await freePorts(this.members.length * 3);
    const peers = this.members.map((_, i) => ({ id: i + 1, quorumPort: ports[3 * i + 1]!, electionPort: ports[3 * i + 2]! }));
    this.members.forEach((m, i) => m.setPeers(i + 1, peers, ports[3 * i]!));
  }

  /** `host:port,host:port,…` of every member. */
  get connectionString(): string {
    return this.members.map((m) => m.connectionString).join(',');
  }

  async leader(): Promise<ZooKeeperServer | undefined> {
    const modes = await Promise.all(this.members.map((m) => (m.running && !m.paused ? m.mode() : undefined)));
    const i = modes.indexOf('leader');
    return i < 0 ? undefined : this.members[i];
  }
}
