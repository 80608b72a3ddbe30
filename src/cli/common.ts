import { constants } from 'node:os';
import { AcquireTimeoutError, ConfigError, PermissionDeniedError, StoreUnavailableError, TlsError } from '../core/errors.js';
import type { AclEntry, BackendName, SslMode } from './args.js';
import { EXIT } from './exit-codes.js';
import { settledWithin } from '../core/abort.js';
import { redact } from './secrets.js';

/** The flags every command that talks to a store has. */
export interface StoreFlags {
  backend: BackendName;
  endpoints: string[];
  name: string;
  /** `--call-timeout`: bound on reaching the store and on each call to it, in ms. */
  callTimeout: number;
  /** `--user`: etcd user, ZooKeeper digest user, Redis ACL user, Postgres role. */
  user?: string;
  /** `--password-file` (else TENURE_PASSWORD): never the password itself on the command line. */
  passwordFile?: string;
  /** `--cacert`, `--cert`, `--key`: PEM files for TLS. */
  cacert?: string;
  cert?: string;
  key?: string;
  /** `--sslmode` (Postgres). */
  sslmode?: SslMode;
  /** `--schema` (Postgres). */
  schema?: string;
  /** `--acl` (ZooKeeper): the ACL of the nodes tenure creates. */
  acl?: AclEntry[];
  /** `--pass-env`: withheld variables the command gets anyway (`tenure run`, `tenure lock`). */
  passEnv?: string[];
}

/** Writes one status line to stderr (stdout belongs to the child, or to `tenure leader`). */
export function statusLine(who: string): (text: string) => void {
  return (text) => void process.stderr.write(redact(`tenure ${who}: ${text}\n`));
}

/** The status a process killed by `sig` reports in a shell. */
export function signalStatus(sig: NodeJS.Signals): number {
  return 128 + constants.signals[sig];
}

/** True for the errors that mean "the store could not be reached (or refused us, or our TLS)". */
export function isUnavailable(e: unknown): boolean {
  return e instanceof StoreUnavailableError || e instanceof PermissionDeniedError || e instanceof TlsError || e instanceof AcquireTimeoutError;
}

/** Exit code for an error met before the child ran. */
export function startupExit(e: unknown, say: (text: string) => void): number {
  const text = e instanceof Error ? e.message : String(e);
  if (e instanceof ConfigError) {
    process.stderr.write(redact(`tenure: ${text}\n`)); // a bad flag value the store's validation caught
    return EXIT.usage;
  }
  if (isUnavailable(e)) {
    say(`store unreachable: ${text}`);
    return EXIT.unavailable;
  }
  say(`internal error: ${text}`);
  return EXIT.software;
}

/**
 * Calls `onSignal` for every SIGTERM/SIGINT (the first asks to stop; later ones are forwarded
 * too). Returns a function that removes the handlers.
 */
export function onStopSignals(onSignal: (sig: NodeJS.Signals, first: boolean) => void): () => void {
  let first = true;
  const handler = (sig: NodeJS.Signals): void => {
    onSignal(sig, first);
    first = false;
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  return () => {
    process.off('SIGTERM', handler);
    process.off('SIGINT', handler);
  };
}

/** Runs `p` but gives up after `ms` (closing a store must not hang the exit). */
export async function within(p: Promise<unknown>, ms: number): Promise<void> {
  await settledWithin(p, ms);
}
