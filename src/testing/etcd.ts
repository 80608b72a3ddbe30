import { execFile } from 'node:child_process';
import { StateError } from '../core/errors.js';
import { existsSync, mkdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { ServerStartError } from '../core/errors.js';
import type { TestCertificates } from './tls.js';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { optionalNumber, optionalString, requireOptions, type OptionKeys } from '../core/validate.js';
import { freePorts, httpRequest } from './net.js';
import { makeTempDir, type SpawnSpec } from './process.js';
import { LocalServer } from './server.js';
import { LocalCluster } from './cluster.js';

const run = promisify(execFile);

/** Options of an {@link EtcdServer}. */
export interface EtcdServerOptions {
  /** Raft heartbeat in ms. @default 50 */
  heartbeatMs?: number;
  /** Raft election timeout in ms; the minimum lease TTL is about 1.5× this. @default 500 */
  electionMs?: number;
  /** Where data dirs go. @default '/dev/shm' when present (etcd fsyncs every write), else the temp dir */
  dataBase?: string;
  /** @default '/usr/bin/etcd' */
  binary?: string;
  /** Serve clients over TLS only, with these certificates, and require a client certificate. */
  tls?: TestCertificates;
}

interface Member {
  name: string;
  clientPort: number;
  peerPort: number;
}

function defaultBase(): string | undefined {
  return existsSync('/dev/shm') ? '/dev/shm' : undefined;
}

/** A member's identity as the v3 maintenance API reports it. */
interface EtcdStatus {
  memberId: string;
  leader: string;
  raftTerm: string;
}

/**
 * A real etcd 3.4 server on loopback ports, data on tmpfs by default, short raft timings so a
 * lease TTL of 1–2 s works and a new raft leader is elected within about a second.
 */
export class EtcdServer extends LocalServer {
  readonly name: string;
  /** Always `127.0.0.1`. */
  readonly host = '127.0.0.1';
  readonly #opts: Required<Omit<EtcdServerOptions, 'dataBase' | 'tls'>> & { dataBase: string | undefined };
  readonly #tls: TestCertificates | undefined;
  #self: Member | undefined;
  #cluster: { members: Member[]; token: string } | undefined;

  constructor(options?: EtcdServerOptions, member?: { name: string; dir: string }) {
    super();
    const o = requireOptions('options', options, SERVER_KEYS);
    const heartbeatMs = optionalNumber('heartbeatMs', o.heartbeatMs, 50, { integer: true, min: 1 });
    const electionMs = optionalNumber('electionMs', o.electionMs, 500, { integer: true, min: 5 * heartbeatMs });
    this.#opts = {
      heartbeatMs,
      electionMs,
      dataBase: o.dataBase === undefined ? defaultBase() : optionalString('dataBase', o.dataBase, ''),
      binary: optionalString('binary', o.binary, '/usr/bin/etcd'),
    };
    this.#tls = o.tls;
    this.name = member ? `etcd-${member.name}` : 'etcd';
    if (member) {
      this.useDir(member.dir);
      this.portRetries = 0; // the cluster picks ports for all members at once
    }
    this.readyTimeoutMs = 20_000;
  }

  /** @internal the cluster wires its members together. */
  setCluster(self: Member, members: Member[], token: string): void {
    this.#self = self;
    this.#cluster = { members, token };
  }

  /** The client port (after `start()`). */
  get clientPort(): number {
    if (!this.#self) throw new StateError(`${this.name}: not started`);
    return this.#self.clientPort;
  }

  /** The raft peer port (after `start()`). */
  get peerPort(): number {
    if (!this.#self) throw new StateError(`${this.name}: not started`);
    return this.#self.peerPort;
  }

  /** `http://127.0.0.1:<clientPort>` (`https://` with TLS) */
  get endpoint(): string {
    return `${this.#tls ? 'https' : 'http'}://${this.host}:${this.clientPort}`;
  }

  /** The etcd3 client's `credentials` (CA, client key and certificate) when serving TLS. */
  get credentials(): {
    /** The test CA. */
    rootCertificate: Buffer;
    /** The client key. */
    privateKey: Buffer;
    /** The client certificate. */
    certChain: Buffer;
  } | undefined {
    const t = this.#tls;
    return t && { rootCertificate: Buffer.from(t.ca), privateKey: Buffer.from(t.clientKey), certChain: Buffer.from(t.clientCert) };
  }

  #httpTls(): { ca: string; cert: string; key: string; rejectUnauthorized: boolean } | undefined {
    const t = this.#tls;
    return t && { ca: t.ca, cert: t.clientCert, key: t.clientKey, rejectUnauthorized: !t.expiredServer };
  }

  /**
   * Runs `etcdctl` against this member (with the TLS flags it needs), e.g.
   * `etcdctl(['user', 'add', 'root:pw'])`; `user` as `name:password` authenticates.
   */
  async etcdctl(args: string[], user?: string): Promise<string> {
    const t = this.#tls;
    const flags = [`--endpoints=${this.endpoint}`, '--dial-timeout=3s', '--command-timeout=5s'];
    if (t) flags.push(`--cacert=${t.caFile}`, `--cert=${t.clientCertFile}`, `--key=${t.clientKeyFile}`);
    if (user) flags.push(`--user=${user}`);
    try {
      const { stdout } = await run('/usr/bin/etcdctl', [...flags, ...args], { env: { ...process.env, ETCDCTL_API: '3' }, timeout: 10_000 });
      return stdout;
    } catch (e) {
      const err = e as { stderr?: string };
      throw new ServerStartError(`${this.name}: etcdctl ${args.slice(0, 2).join(' ')} failed`, err.stderr ?? '', { cause: e });
    }
  }

  /**
   * Turns on etcd auth with a `root` user (password `rootPassword`) and, for each entry of
   * `roles`, a role with read-write access to one key prefix and a user of the same name holding
   * it (password `<name>-secret` unless given): the least-privilege set-up the README describes.
   */
  async enableAuth(rootPassword: string, roles: { name: string; prefix: string; password?: string }[] = []): Promise<void> {
    await this.etcdctl(['user', 'add', `root:${rootPassword}`]);
    await this.etcdctl(['auth', 'enable']);
    const root = `root:${rootPassword}`;
    for (const r of roles) {
      await this.etcdctl(['role', 'add', r.name], root);
      await this.etcdctl(['role', 'grant-permission', r.name, '--prefix=true', 'readwrite', r.prefix], root);
      await this.etcdctl(['user', 'add', `${r.name}:${r.password ?? `${r.name}-secret`}`], root);
      await this.etcdctl(['user', 'grant-role', r.name, r.name], root);
    }
  }

  /** `[endpoint]`, the shape the etcd3 client's `hosts` option takes. */
  get endpoints(): string[] {
    return [this.endpoint];
  }

  /** Same as `endpoint`. */
  get connectionString(): string {
    return this.endpoint;
  }

  /** This member's id, the raft leader's id and the raft term, from the v3 maintenance API. */
  async status(timeoutMs = 1000): Promise<EtcdStatus> {
    const r = await httpRequest(this.clientPort, '/v3/maintenance/status', { method: 'POST', body: '{}', timeoutMs, tls: this.#httpTls() });
    const j = JSON.parse(r.body) as { header?: { member_id?: string }; leader?: string; raftTerm?: string };
    return { memberId: String(j.header?.member_id ?? ''), leader: String(j.leader ?? ''), raftTerm: String(j.raftTerm ?? '') };
  }

  protected override tempBase(): string | undefined {
    return this.#opts.dataBase;
  }

  protected async allocatePorts(): Promise<void> {
    if (this.#cluster) return;
    const [clientPort, peerPort] = await freePorts(2);
    const self = { name: 'n1', clientPort: clientPort!, peerPort: peerPort! };
    this.#self = self;
    this.#cluster = { members: [self], token: `tenure-${randomBytes(6).toString('hex')}` };
  }

  protected spawnSpec(dir: string): SpawnSpec {
    const self = this.#self!;
    const cluster = this.#cluster!;
    const peerUrl = (m: Member): string => `http://${this.host}:${m.peerPort}`;
    const t = this.#tls;
    const client = `${t ? 'https' : 'http'}://${this.host}:${self.clientPort}`;
    const tlsArgs = t ? ['--cert-file', t.certFile, '--key-file', t.keyFile, '--trusted-ca-file', t.caFile, '--client-cert-auth'] : [];
    return {
      command: this.#opts.binary,
      args: [
        '--name', self.name,
        '--data-dir', join(dir, 'data'),
        '--listen-client-urls', client,
        '--advertise-client-urls', client,
        '--listen-peer-urls', peerUrl(self),
        '--initial-advertise-peer-urls', peerUrl(self),
        '--initial-cluster', cluster.members.map((m) => `${m.name}=${peerUrl(m)}`).join(','),
        '--initial-cluster-state', 'new',
        '--initial-cluster-token', cluster.token,
        '--heartbeat-interval', String(this.#opts.heartbeatMs),
        '--election-timeout', String(this.#opts.electionMs),
        '--logger', 'zap',
        '--log-level', 'warn',
        ...tlsArgs,
      ],
      cwd: dir,
      logFile: join(dir, 'server.log'),
    };
  }

  protected async probe(): Promise<boolean> {
    const r = await httpRequest(this.clientPort, '/health', { timeoutMs: 500, tls: this.#httpTls() });
    return r.status === 200 && /"health":\s*"true"/.test(r.body);
  }
}

/** Options of an {@link EtcdCluster}: each member's, and the size. */
const SERVER_KEYS: OptionKeys<EtcdServerOptions> = { heartbeatMs: true, electionMs: true, dataBase: true, binary: true, tls: true };

export interface EtcdClusterOptions extends EtcdServerOptions {
  /** Number of members. @default 3 */
  size?: number;
}

/** A real etcd cluster (3 members by default) on loopback ports. */
export class EtcdCluster extends LocalCluster<EtcdServer> {
  /** The members, in order. */
  readonly members: readonly EtcdServer[];

  constructor(options?: EtcdClusterOptions) {
    const o = requireOptions('options', options, { ...SERVER_KEYS, size: true });
    const size = optionalNumber('size', o.size, 3, { integer: true, min: 1, max: 9 });
    const { size: _size, ...serverOptions } = o;
    new EtcdServer(serverOptions); // validate member options before making anything
    super(makeTempDir('etcd-cluster', serverOptions.dataBase ?? defaultBase()));
    this.members = Array.from({ length: size }, (_, i) => {
      const dir = join(this.root, `n${i + 1}`);
      mkdirSync(dir);
      return new EtcdServer(serverOptions, { name: `n${i + 1}`, dir });
    });
  }

  protected async wire(): Promise<void> {
    const ports = await freePorts(this.members.length * 2);
    const members = this.members.map((_, i) => ({ name: `n${i + 1}`, clientPort: ports[2 * i]!, peerPort: ports[2 * i + 1]! }));
    const token = `tenure-${randomBytes(6).toString('hex')}`; // one per attempt: never reuse a cluster identity
    this.members.forEach((m, i) => m.setCluster(members[i]!, members, token));
  }

  /** Every member's client endpoint. */
  get endpoints(): string[] {
    return this.members.map((m) => m.endpoint);
  }

  async leader(): Promise<EtcdServer | undefined> {
    const live = this.members.filter((m) => m.running && !m.paused);
    const statuses = await Promise.all(live.map((m) => m.status(500).catch(() => undefined)));
    for (let i = 0; i < live.length; i++) {
      const s = statuses[i];
      if (s && s.leader !== '' && s.leader !== '0' && s.memberId === s.leader) return live[i];
    }
    return undefined;
  }
}
