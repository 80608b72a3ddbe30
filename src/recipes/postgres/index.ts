/**
 * tenure/postgres: pool-safe advisory locks with fences, an election, and a fenced resource kept
 * in Postgres. Needs the optional peer dependency `pg`.
 */
export { withXactLock, tryWithXactLock, type XactLockContext, type XactLockOptions } from './xact.js';
export { PgSessionLock, type PgLockOptions } from './session-lock.js';
export { PgElection, type PgElectionOptions } from './election.js';
export { PgMembership, type PgMembershipOptions } from './membership.js';
export { advisoryKey, DEFAULT_NAMESPACE, type AdvisoryKey, type AdvisoryKeyOptions } from './keys.js';
export { ensureSchema, SCHEMA_SQL, GRANTS_SQL, type EnsureSchemaOptions } from './schema.js';
export type { PgSchemaOptions } from './ident.js';
export { PostgresFencedResource, type PostgresFencedResourceOptions, type PostgresFencedWriteOptions } from './fenced-resource.js';
