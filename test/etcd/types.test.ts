import { describe, expectTypeOf, it } from 'vitest';
import type { Candidate, Lease } from '../../src/index.js';
import { EtcdElection, EtcdMutex, EtcdSession, type EtcdLeaderInfo, type Term } from '../../src/recipes/etcd/index.js';

describe('tenure/etcd types', () => {
  it('a Term is a Lease with the election operations, and an election is a Candidate', () => {
    expectTypeOf<Term>().toMatchTypeOf<Lease>();
    expectTypeOf<Term['fence']>().toEqualTypeOf<bigint>();
    expectTypeOf<Term['proclaim']>().parameters.toEqualTypeOf<[string | Buffer]>();
    expectTypeOf<EtcdElection>().toMatchTypeOf<Candidate>();
    expectTypeOf<EtcdElection['campaign']>().returns.resolves.toEqualTypeOf<Term>();
    expectTypeOf<EtcdLeaderInfo['fence']>().toEqualTypeOf<bigint | undefined>();
  });

  it('the mutex hands out Leases and every recipe is AsyncDisposable', () => {
    expectTypeOf<EtcdMutex['acquire']>().returns.resolves.toEqualTypeOf<Lease>();
    expectTypeOf<EtcdMutex['tryAcquire']>().returns.resolves.toEqualTypeOf<Lease | undefined>();
    expectTypeOf<EtcdMutex>().toMatchTypeOf<AsyncDisposable>();
    expectTypeOf<EtcdElection>().toMatchTypeOf<AsyncDisposable>();
    expectTypeOf<EtcdSession>().toMatchTypeOf<AsyncDisposable>();
    expectTypeOf<EtcdSession['signal']>().toEqualTypeOf<AbortSignal>();
  });
});
