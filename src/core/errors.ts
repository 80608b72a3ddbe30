import { redactError, redactText } from './redact.js';

/**
 * tenure's error hierarchy: one base class with a stable `code`, one subclass per condition.
 * Never throw strings; every rejection a user can see is one of these (or carries one as `cause`).
 */

/** Stable machine-readable codes, one per error class. */
export type TenureErrorCode =
  | 'TENURE_ERROR'
  | 'CONFIG_INVALID'
  | 'LEASE_LOST'
  | 'STALE_FENCE'
  | 'NOT_LEADER'
  | 'SESSION_EXPIRED'
  | 'ACQUIRE_TIMEOUT'
  | 'CLOSED'
  | 'NOT_HELD'
  | 'BUSY'
  | 'INVALID_STATE'
  | 'STORE_UNAVAILABLE'
  | 'PERMISSION_DENIED'
  | 'TLS_FAILED'
  | 'REQUEST_TOO_LARGE'
  | 'PEER_MISSING'
  | 'TERM_ENDED'
  | 'NO_TERM'
  | 'SERVER_START_FAILED';

export interface TenureErrorOptions {
  /** The underlying error, when this one wraps another. */
  cause?: unknown;
  /** Whether trying the same operation again may succeed. @default false */
  retryable?: boolean;
}

/**
 * Base class of every error tenure throws. Its message and its whole `cause` chain are cleaned of
 * secrets (URL passwords, secret-named fields, driver command arguments: core/redact.ts).
 */
export class TenureError extends Error {
  /** Stable code to branch on (`err.code === 'STALE_FENCE'`). */
  readonly code: TenureErrorCode;
  /** Whether trying the same operation again may succeed. */
  readonly retryable: boolean;

  constructor(message: string, code: TenureErrorCode = 'TENURE_ERROR', options: TenureErrorOptions = {}) {
    super(redactText(message), options.cause === undefined ? undefined : { cause: redactError(options.cause) });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/**
 * An option or argument is invalid: wrong type, out of range, malformed. Thrown before any I/O
 * (at construction for options, at the call for arguments). Never used for a wrong state.
 */
export class ConfigError extends TenureError {
  /** The option or argument that is wrong, e.g. `ttlSeconds` or `path`. */
  readonly field: string;

  constructor(field: string, message: string, options: TenureErrorOptions = {}) {
    super(`${field}: ${message}`, 'CONFIG_INVALID', options);
    this.field = field;
  }
}

/** Why a lease ended or may have ended. */
export type LeaseLostReason =
  /** The holder released it (`release()`, `resign()`, dispose). */
  | 'released'
  /** The local deadline on the monotonic clock passed before a renewal was acknowledged. */
  | 'deadline'
  /** The store said the lease is gone (expired, revoked, deleted, owned by someone else). */
  | 'expired'
  /** The connection was interrupted; the lease may still be alive but cannot be trusted (ZK SUSPENDED). */
  | 'suspended'
  /** The session that owned the lease ended (ZK session expiry, etcd lease gone). */
  | 'session-lost'
  /** A renewal failed or was refused. */
  | 'renew-failed'
  /** The owning session or recipe was closed. */
  | 'closed'
  /** The holder's connection to the store died (Postgres pinned client). */
  | 'connection-lost';

/** The lease ended (or may have ended) while its holder held it. */
export class LeaseLostError extends TenureError {
  /** Why it ended: `deadline`, `expired`, `suspended`, `session-lost`, `renew-failed`, `connection-lost`, `released` or `closed`. */
  readonly reason: LeaseLostReason;
  /** The fence of the lease that was lost, when known. */
  readonly fence: bigint | undefined;

  constructor(reason: LeaseLostReason, message?: string, options: TenureErrorOptions & { fence?: bigint } = {}) {
    super(message ?? `lease lost: ${reason}`, 'LEASE_LOST', { retryable: reason !== 'released' && reason !== 'closed', ...options });
    this.reason = reason;
    this.fence = options.fence;
  }
}

/** A fenced resource refused a write whose fence is lower than the highest it has accepted. */
export class StaleFenceError extends TenureError {
  /** The fence the rejected write carried. */
  readonly fence: bigint;
  /** The highest fence the resource had accepted when it refused. */
  readonly highest: bigint;
  /** The resource's name, when it has one. */
  readonly resource: string | undefined;

  constructor(fence: bigint, highest: bigint, resource?: string) {
    super(
      `stale fence ${fence} rejected${resource === undefined ? '' : ` by ${resource}`}: highest accepted is ${highest}`,
      'STALE_FENCE',
    );
    this.fence = fence;
    this.highest = highest;
    this.resource = resource;
  }
}

/** An operation that needs leadership ran while not leading. */
export class NotLeaderError extends TenureError {
  constructor(message = 'not the leader', options: TenureErrorOptions = {}) {
    super(message, 'NOT_LEADER', options);
  }
}

/** The session behind a recipe expired or was lost; the recipe cannot continue on it. */
export class SessionExpiredError extends TenureError {
  constructor(message = 'session expired', options: TenureErrorOptions = {}) {
    super(message, 'SESSION_EXPIRED', { retryable: true, ...options });
  }
}

/** An acquire or campaign did not succeed within its `timeoutMs`. */
export class AcquireTimeoutError extends TenureError {
  /** The `timeoutMs` the wait was given. */
  readonly timeoutMs: number;

  constructor(timeoutMs: number, what = 'acquire') {
    super(`${what} timed out after ${timeoutMs} ms`, 'ACQUIRE_TIMEOUT', { retryable: true });
    this.timeoutMs = timeoutMs;
  }
}

/** A recipe, session or server handle was used after `close()` / `stop()`. */
export class ClosedError extends TenureError {
  constructor(what: string) {
    super(`${what} is closed`, 'CLOSED');
  }
}

/** An operation that needs a held lock or a live term ran without one (owner-checked calls). */
export class NotHeldError extends TenureError {
  constructor(message = 'not held', options: TenureErrorOptions = {}) {
    super(message, 'NOT_HELD', options);
  }
}

/**
 * The object is already doing this: a second `acquire()` / `campaign()` on one lock or candidate
 * object while it waits or holds. One object is one participant; use one object per concurrent
 * holder.
 */
export class BusyError extends TenureError {
  constructor(message: string, options: TenureErrorOptions = {}) {
    super(message, 'BUSY', options);
  }
}

/** A call that the object's lifecycle state does not allow (e.g. `start()` twice). */
export class StateError extends TenureError {
  constructor(message: string, options: TenureErrorOptions = {}) {
    super(message, 'INVALID_STATE', options);
  }
}

/**
 * The store could not be reached or did not answer in time (refused, reset, blackholed, down).
 * Always retryable; `store` and `endpoint` say which.
 */
export class StoreUnavailableError extends TenureError {
  /** `etcd`, `zookeeper`, `redis` or `postgres`. */
  readonly store: string;
  /** The endpoint(s) tried, when known (never with credentials). */
  readonly endpoint: string | undefined;

  constructor(store: string, endpoint: string | undefined, message: string, options: TenureErrorOptions = {}) {
    super(`${store}${endpoint ? ` at ${endpoint}` : ''}: ${message}`, 'STORE_UNAVAILABLE', { ...options, retryable: true });
    this.store = store;
    this.endpoint = endpoint;
  }
}

/** The store refused the operation for lack of privileges (auth failed, ACL, role). Not retried. */
export class PermissionDeniedError extends TenureError {
  /** `etcd`, `zookeeper`, `redis` or `postgres`. */
  readonly store: string;

  constructor(store: string, message: string, options: TenureErrorOptions = {}) {
    super(`${store}: permission denied: ${message}`, 'PERMISSION_DENIED', options);
    this.store = store;
  }
}

/**
 * What went wrong in a TLS handshake: `unknown-ca` (the server's certificate is not signed by a
 * CA the client trusts), `expired` (a certificate is out of its validity), `hostname-mismatch`
 * (the server's certificate is for another name), `client-certificate` (the server wanted a
 * client certificate and got none, or one it does not trust), `plaintext` (one side does not
 * speak TLS: plaintext to a TLS port or TLS to a plaintext one).
 */
export type TlsProblem = 'unknown-ca' | 'expired' | 'hostname-mismatch' | 'client-certificate' | 'plaintext';

const TLS_PROBLEMS: Record<TlsProblem, string> = {
  'unknown-ca': "the server's certificate is not signed by a CA this client trusts (check the client's CA)",
  expired: 'a certificate has expired or is not yet valid',
  'hostname-mismatch': "the server's certificate is not for the name connected to (check the host or servername)",
  'client-certificate': "the server refused this client's certificate, or wanted one and got none (check the client certificate and key)",
  plaintext: 'one side does not speak TLS (plaintext to a TLS port, or TLS to a plaintext one)',
};

/**
 * A TLS handshake with the store failed: a misconfiguration, not an outage. Never retryable (the
 * same certificates fail the same way); `problem` says which, the message says it in words.
 */
export class TlsError extends TenureError {
  /** `etcd`, `redis` or `postgres`. */
  readonly store: string;
  /** The endpoint(s) tried, when known (never with credentials). */
  readonly endpoint: string | undefined;
  /** What went wrong: `unknown-ca`, `expired`, `hostname-mismatch`, `client-certificate` or `plaintext`. */
  readonly problem: TlsProblem;

  constructor(store: string, endpoint: string | undefined, problem: TlsProblem, detail: string, options: TenureErrorOptions = {}) {
    super(`${store}${endpoint ? ` at ${endpoint}` : ''}: TLS failed: ${TLS_PROBLEMS[problem]}: ${detail}`, 'TLS_FAILED', { ...options, retryable: false });
    this.store = store;
    this.endpoint = endpoint;
    this.problem = problem;
  }
}

/** A value or request is over the store's size limit. Never retried: it can never succeed. */
export class RequestTooLargeError extends TenureError {
  /** `etcd`, `zookeeper`, `redis` or `postgres`. */
  readonly store: string;

  constructor(store: string, message: string, options: TenureErrorOptions = {}) {
    super(`${store}: request too large: ${message}`, 'REQUEST_TOO_LARGE', options);
    this.store = store;
  }
}

/** A backend needed its client package (at `EtcdSession.create`, `createEtcdClient`, `ZkSession.create`) and it is not installed. */
export class MissingPeerError extends TenureError {
  /** The npm package to install. */
  readonly packageName: string;

  constructor(entry: string, packageName: string, options: TenureErrorOptions = {}) {
    super(`${entry} needs the package '${packageName}': install it with \`npm install ${packageName}\``, 'PEER_MISSING', options);
    this.packageName = packageName;
  }
}

/** Why a leadership term ended (the lifecycle manager's demotion reasons). */
export type TermEndReason = 'lost' | 'resigned' | 'closed' | 'hook-error' | 'hook-returned';

/**
 * The reason a term's signal aborts under the lifecycle manager: the term ended because its
 * lease was lost (`lostReason` says how; `cause` is the LeaseLostError), it resigned, the manager
 * closed, a hook threw (`cause` is its error), or the hooks returned (`releaseOnReturn`).
 */
export class TermEndedError extends TenureError {
  /** Why the term ended: `lost`, `resigned`, `closed`, `hook-error` or `hook-returned`. */
  readonly reason: TermEndReason;
  /** For `reason: 'lost'`, why the lease ended. */
  readonly lostReason: LeaseLostReason | undefined;
  /** The ended term's fence. */
  readonly fence: bigint;

  constructor(reason: TermEndReason, fence: bigint, options: TenureErrorOptions & { lostReason?: LeaseLostReason } = {}) {
    super(`term ${fence} ended: ${reason}${options.lostReason ? ` (${options.lostReason})` : ''}`, 'TERM_ENDED', { retryable: reason !== 'closed', ...options });
    this.reason = reason;
    this.lostReason = options.lostReason;
    this.fence = fence;
  }
}

/**
 * `currentTerm()` was called outside a term: not below a `@Leader()` method, an `onElected` hook,
 * a leader-only timer's run or work tracked with a term.
 */
export class NoTermError extends TenureError {
  constructor(message = 'currentTerm(): not inside a leadership term (call it below a @Leader() method, an onElected hook, a timer run or tracked work)') {
    super(message, 'NO_TERM');
  }
}

/** A test server did not become ready. The message carries the tail of its log. */
export class ServerStartError extends TenureError {
  /** The tail of the server's log. */
  readonly log: string;

  constructor(message: string, log: string, options: TenureErrorOptions = {}) {
    super(log ? `${message}\n--- server log (tail) ---\n${log}` : message, 'SERVER_START_FAILED', options);
    this.log = log;
  }
}
