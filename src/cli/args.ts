import { InvalidArgumentError } from 'commander';
import type { ZkAcl } from '../recipes/zk/acl.js';
import { redact, WITHHELD } from './secrets.js';

/** The stores `--backend` accepts. */
export const BACKENDS = ['etcd', 'zk', 'redis', 'postgres'] as const;
export type BackendName = (typeof BACKENDS)[number];

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * Parses a duration flag: `500ms`, `10s`, `1.5m`, `1h`, or a bare number of seconds (as
 * `timeout(1)` and `sleep(1)` read one). Throws commander's InvalidArgumentError, which names the
 * flag in the one-line usage error. Written here because neither the platform nor a kept
 * dependency parses durations (commander and `util.parseArgs` take strings), and the usual
 * package, `ms`, reads a bare number as milliseconds and accepts `1y` and negative values: it
 * would change what the flags mean, for one more runtime dependency.
 */
export function duration(options: { min?: number; allowZero?: boolean } = {}): (value: string) => number {
  const min = options.min ?? 1;
  return (value: string) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
    if (!m) throw new InvalidArgumentError(`'${value}' is not a duration (e.g. 500ms, 10s, 2m)`);
    const ms = Math.round(Number(m[1]) * UNITS[m[2] ?? 's']!);
    if (ms === 0 && options.allowZero) return 0;
    if (ms < min) throw new InvalidArgumentError(`'${value}' is shorter than ${min} ms`);
    if (ms > 2 ** 31 - 1) throw new InvalidArgumentError(`'${value}' is longer than 24 days`);
    return ms;
  };
}

/** Parses `--endpoints`: a comma-separated list, none empty. */
export function endpointList(value: string): string[] {
  const list = value.split(',').map((e) => e.trim());
  if (list.length === 0 || list.some((e) => e.length === 0)) throw new InvalidArgumentError(`'${redact(value)}' is not a comma-separated list of endpoints`);
  return list;
}

/** `--sslmode`, as libpq names them (no fallback to plaintext: no `allow` or `prefer`). */
export const SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** One `--acl` entry: `creator` (the --user's digest, every permission) or a ZooKeeper ACL. */
export type AclEntry = 'creator' | ZkAcl;

const PERMS: Record<string, number> = { r: 1, w: 2, c: 4, d: 8, a: 16 };

/**
 * Parses `--acl`: comma-separated `creator`, `open` (`world:anyone:cdrwa`) or `scheme:id:perms`
 * entries as zkCli's setAcl takes them (`world:anyone:r`, `digest:ops:<base64 sha1>:cdrwa`,
 * `ip:10.0.0.0/8:r`).
 */
export function aclList(value: string): AclEntry[] {
  return value.split(',').map((raw): AclEntry => {
    const e = raw.trim();
    if (e === 'creator') return 'creator';
    if (e === 'open') return { permission: 31, id: { scheme: 'world', id: 'anyone' } };
    const m = /^([a-z0-9]+):(.*):([rwcda]+)$/.exec(e);
    if (!m || new Set(m[3]).size !== m[3]!.length) throw new InvalidArgumentError(`'${redact(e)}' is not creator, open or scheme:id:perms (perms from cdrwa)`);
    return { permission: [...m[3]!].reduce((bits, p) => bits | PERMS[p]!, 0), id: { scheme: m[1]!, id: m[2]! } };
  });
}

/** Parses `--pass-env`: comma-separated names of the variables tenure withholds, or `all`. */
export function passEnvList(value: string): string[] {
  const list = value.split(',').map((v) => v.trim());
  for (const v of list) {
    if (v !== 'all' && !(WITHHELD as readonly string[]).includes(v)) throw new InvalidArgumentError(`'${v}' is not one of the variables tenure withholds (${WITHHELD.join(', ')}) or all`);
  }
  return list;
}

/** Parses `--name` and `--id`: non-empty, at most 256 characters, no control characters. */
export function label(value: string): string {
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (value.length === 0 || value.length > 256 || /[\u0000-\u001f]/.test(value)) throw new InvalidArgumentError(`'${value}' must be 1 to 256 printable characters`);
  return value;
}

/** A duration for status lines: `10s`, `1500ms`. */
export function showMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
