/**
 * tenure/nestjs: leader election in a NestJS 11 application (`@nestjs/common` and `@nestjs/core`,
 * optional peer dependencies). `TenureModule.forRoot()` per election, an injectable
 * `LeadershipService`, `@Leader()` on providers (leader-only `@nestjs/schedule` handlers too), a
 * graceful hand-off on `app.close()`, and a `@nestjs/terminus` health indicator. Uses TypeScript's
 * `experimentalDecorators`, as Nest itself does.
 */
export { TenureModule, type TenureModuleOptions, type TenureModuleAsyncOptions, type TenureElectionOptions } from './module.js';
export { LeadershipService, InjectLeadership, getLeadershipToken, DEFAULT_ELECTION } from './service.js';
export { LeadershipHealthIndicator, type LeadershipHealthOptions, type LeadershipHealthResult, type ElectionHealth } from './health.js';
