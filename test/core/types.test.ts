import { expectTypeOf, it } from 'vitest';
import type { Candidate, FencedResource, Lease, LeaseLostReason, TenureErrorCode } from '../../src/index.js';
import { InMemoryFencedResource } from '../../src/index.js';
import type { LeaseController } from '../../src/core/lease.js';

// Checked by `npm run typecheck` (tsc over test/); at run time these are no-ops.
it('public types keep their shape', () => {
  expectTypeOf<Lease['fence']>().toEqualTypeOf<bigint>();
  expectTypeOf<Lease['signal']>().toEqualTypeOf<AbortSignal>();
  expectTypeOf<Lease>().toHaveProperty(Symbol.asyncDispose);
  expectTypeOf<Lease['release']>().returns.toEqualTypeOf<Promise<void>>();
  expectTypeOf<Candidate['campaign']>().returns.toEqualTypeOf<Promise<Lease>>();
  expectTypeOf<InMemoryFencedResource>().toMatchTypeOf<FencedResource<void>>();
  expectTypeOf(new InMemoryFencedResource().write(1n, () => 42)).toEqualTypeOf<Promise<number>>();
  expectTypeOf<LeaseController['lease']>().toEqualTypeOf<Lease>();
  expectTypeOf<'deadline'>().toMatchTypeOf<LeaseLostReason>();
  expectTypeOf<'STALE_FENCE'>().toMatchTypeOf<TenureErrorCode>();
});
