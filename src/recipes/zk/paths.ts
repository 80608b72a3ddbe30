import { randomUUID } from 'node:crypto';
import { ConfigError } from '../../core/errors.js';

/**
 * ZooKeeper path rules and the node names tenure's recipes create. A recipe node is
 * `<base>/_c_<guid>-<lockName><sequence>`: the per-attempt GUID makes creation "protected" (a
 * create retried after a connection loss finds its own node), the 10-digit sequence orders the
 * queue.
 */

// Characters ZooKeeper refuses in a path (PathUtils.validatePath).
// eslint-disable-next-line no-control-regex
const INVALID = /[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]/;

/** Throws a {@link ConfigError} naming `field` unless `path` is a valid absolute ZooKeeper path. */
export function validatePath(field: string, path: unknown): string {
  if (typeof path !== 'string') throw new ConfigError(field, `must be a string, got ${typeof path}`);
  if (!path.startsWith('/')) throw new ConfigError(field, `must start with '/', got ${JSON.stringify(path)}`);
  if (path.length > 1 && path.endsWith('/')) throw new ConfigError(field, `must not end with '/', got ${JSON.stringify(path)}`);
  if (INVALID.test(path)) throw new ConfigError(field, `contains a character ZooKeeper does not allow: ${JSON.stringify(path)}`);
  if (path === '/') throw new ConfigError(field, "must name a node below the root, got '/'");
  for (const part of path.slice(1).split('/')) {
    if (part === '') throw new ConfigError(field, `must not contain an empty segment ('//'), got ${JSON.stringify(path)}`);
    if (part === '.' || part === '..') throw new ConfigError(field, `must not contain relative segments ('.', '..'), got ${JSON.stringify(path)}`);
  }
  return path;
}

/** Joins a parent path and a child name. */
export function joinPath(parent: string, child: string): string {
  return parent === '/' ? `/${child}` : `${parent}/${child}`;
}

/** The last segment of a path. */
export function nodeName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

const PROTECTED = '_c_';

/** A fresh protected prefix for one creation attempt: `_c_<guid>-`. */
export function protectedPrefix(): string {
  return `${PROTECTED}${randomUUID()}-`;
}

/** The 10-digit sequence ZooKeeper appended to a sequential node's name (-1 when there is none). */
export function sequenceOf(name: string): number {
  // A digit loop, not a regex: every joiner parses every child's name (N² for N participants).
  const end = name.length;
  if (end < 10) return -1;
  let seq = 0;
  for (let i = end - 10; i < end; i++) {
    const d = name.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    seq = seq * 10 + d;
  }
  return seq;
}

/** The name without the protected prefix, e.g. `lock-0000000007` or `READ-0000000003`. */
export function stripProtected(name: string): string {
  return name.startsWith(PROTECTED) && name.length > 40 ? name.slice(PROTECTED.length + 37) : name;
}

/**
 * Sorts sequential node names by their sequence (prefixes ignored), keeping only `lockName` nodes.
 * Each name's sequence is parsed once, not per comparison: every joiner sorts every child, and
 * with 1,000 participants a regex per comparison was seconds of CPU.
 */
export function sortBySequence(names: readonly string[], lockNames: readonly string[]): string[] {
  const keyed: { name: string; seq: number }[] = [];
  for (const name of names) {
    const seq = queuedSequence(name, lockNames);
    if (seq >= 0) keyed.push({ name, seq });
  }
  return keyed.sort((a, b) => a.seq - b.seq).map((k) => k.name);
}

/** The node's sequence when it is a `lockNames` node of the queue, else -1. */
export function queuedSequence(name: string, lockNames: readonly string[]): number {
  const seq = sequenceOf(name);
  if (seq < 0) return -1;
  const from = name.startsWith(PROTECTED) && name.length > 40 ? PROTECTED.length + 37 : 0; // as stripProtected, without a copy
  return lockNames.some((l) => name.startsWith(l, from)) ? seq : -1;
}

/** An 8-byte big-endian ZooKeeper long (zxid, session id) as a bigint. */
export function longToBigInt(buf: Buffer): bigint {
  return buf.readBigInt64BE(0);
}
