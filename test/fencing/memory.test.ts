import { expect, it } from 'vitest';
import { ConfigError, InMemoryFencedResource } from '../../src/index.js';
import { fencedResourceContract } from './contract.js';

fencedResourceContract('InMemoryFencedResource', async () => {
  const resource = new InMemoryFencedResource('ledger');
  let value: string | undefined;
  return {
    resource,
    write: (fence, v) => resource.write(fence, () => void (value = v)),
    failingWrite: (fence) =>
      resource.write(fence, () => {
        throw new Error('body failed');
      }),
    read: async () => value,
  };
});

it('records every decision in order for demos and checkers', async () => {
  const r = new InMemoryFencedResource('x');
  await r.write(2n, () => undefined);
  await r.write(1n, () => undefined).catch(() => undefined);
  expect(r.history()).toEqual([
    { fence: 2n, accepted: true, highest: 2n },
    { fence: 1n, accepted: false, highest: 2n },
  ]);
});

it('rejects an empty resource name with ConfigError naming the field', () => {
  expect(() => new InMemoryFencedResource('')).toThrow(ConfigError);
  expect(() => new InMemoryFencedResource('')).toThrow(/^name:/);
});
