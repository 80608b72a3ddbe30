import { DOWNGRADE_NAME, READ_NAME, ReadLockDriver, WriteLockDriver } from './drivers.js';
import { requireSession } from './guard.js';
import { InterProcessLock, type InterProcessMutexOptions } from './mutex.js';
import { optionalId, requireOptions } from '../../core/validate.js';
import { validatePath } from './paths.js';
import { validateAcl } from './acl.js';
import type { ZkSession } from './session.js';

/**
 * A distributed read/write lock (Curator's InterProcessReadWriteLock): one queue of `READ-` and
 * `WRIT-` nodes under `path`. Readers share; a writer excludes readers and writers. Write→read
 * downgrade: while this object's write lock is held, the read lock is granted at once (its node is
 * marked `DOWN-`, and no writer is granted while one exists); then release the write lock.
 * Read→write upgrade is not supported (it would wait for itself).
 *
 * `readLock()`/`writeLock()` return the same two objects every time; each is one participant
 * (see InterProcessLock).
 */
export class InterProcessReadWriteLock implements AsyncDisposable {
  /** The lock's path (both sides queue under it). */
  readonly path: string;
  readonly #write: InterProcessLock;
  readonly #read: InterProcessLock;

  constructor(session: ZkSession, path: string, options?: InterProcessMutexOptions) {
    requireSession(session);
    const o = requireOptions('options', options, { id: true, acl: true });
    const id = optionalId(o.id);
    const acl = validateAcl(o.acl);
    this.path = validatePath('path', path);
    const writer = new WriteLockDriver();
    const reader = new ReadLockDriver(READ_NAME);
    const downgraded = new ReadLockDriver(DOWNGRADE_NAME);
    this.#write = new InterProcessLock(session, this.path, () => writer, 'write lock', id, acl);
    this.#read = new InterProcessLock(session, this.path, () => (this.#write.lease ? downgraded : reader), 'read lock', id, acl);
  }

  /** The shared (read) side. */
  readLock(): InterProcessLock {
    return this.#read;
  }

  /** The exclusive (write) side. */
  writeLock(): InterProcessLock {
    return this.#write;
  }

  /** Closes both sides (pending acquires abort, held leases are released). Idempotent. */
  async close(): Promise<void> {
    await Promise.all([this.#read.close(), this.#write.close()]);
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
