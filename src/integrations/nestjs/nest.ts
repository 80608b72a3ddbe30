import commonModule from '@nestjs/common';
import coreModule from '@nestjs/core';

/**
 * NestJS 11 (CommonJS packages, optional peers), imported statically like tenure/metrics' and
 * tenure/inversify's frameworks: the decorators are needed when the classes are defined, and no
 * entry may have a top-level await. Without them the import fails with Node's
 * ERR_MODULE_NOT_FOUND naming the package. The default import is the package's `module.exports`,
 * the same objects the application's own imports get, so the decorators and the
 * DiscoveryService are Nest's own.
 */
export const common: typeof import('@nestjs/common') = commonModule;
export const core: typeof import('@nestjs/core') = coreModule;
