import { describe, expectTypeOf, it } from 'vitest';
import type { Candidate } from '../../src/core/candidate.js';
import type { Lease } from '../../src/core/lease.js';
import {
  InterProcessMutex,
  InterProcessReadWriteLock,
  InterProcessSemaphoreV2,
  LeaderLatch,
  ZkSession,
  type ZkConnectionState,
  type ZkSessionEvents,
} from '../../src/recipes/zk/index.js';

describe('tenure/zk types', () => {
  it('acquire resolves to Lease(s) and every recipe is AsyncDisposable', () => {
    expectTypeOf<InterProcessMutex['acquire']>().returns.resolves.toEqualTypeOf<Lease>();
    expectTypeOf<InterProcessSemaphoreV2['acquire']>().returns.resolves.toEqualTypeOf<Lease[]>();
    expectTypeOf<ReturnType<InterProcessReadWriteLock['readLock']>['acquire']>().returns.resolves.toEqualTypeOf<Lease>();
    expectTypeOf<ZkSession>().toMatchTypeOf<AsyncDisposable>();
    expectTypeOf<InterProcessMutex>().toMatchTypeOf<AsyncDisposable>();
    expectTypeOf<InterProcessSemaphoreV2>().toMatchTypeOf<AsyncDisposable>();
    expectTypeOf<InterProcessReadWriteLock>().toMatchTypeOf<AsyncDisposable>();
    expectTypeOf<LeaderLatch>().toMatchTypeOf<AsyncDisposable>();
  });

  it('the latch is a Candidate and its events are typed', () => {
    expectTypeOf<LeaderLatch>().toMatchTypeOf<Candidate>();
    expectTypeOf<ZkSessionEvents['state']>().toEqualTypeOf<(state: ZkConnectionState) => void>();
    expectTypeOf<ZkSessionEvents['LOST']>().toEqualTypeOf<() => void>();
  });
});
