import { describe, expect, it } from 'vitest';
import { resolveDotSegments } from '../../src/http/edge/request-target.js';

describe('resolveDotSegments', () => {
  const resolved: Array<[string, string]> = [
    ['/', '/'],
    ['/v1/models', '/v1/models'],
    ['/v1/./x/../models?q=../..', '/v1/models?q=../..'],
    ['/v1/%2e/models', '/v1/models'],
    ['/v1/x/%2E%2e/models', '/v1/models'],
    ['/a/b/..', '/a/'],
    ['/a/.', '/a/'],
    ['/a/..', '/'],
    ['//v1/models', '//v1/models'],
    ['/...', '/...'],
    ['/a/..%2fb', '/a/..%2fb'],
  ];
  for (const [target, expected] of resolved) {
    it(`${target} → ${expected}`, () => {
      expect(resolveDotSegments(target)).toBe(expected);
    });
  }

  const refused = [
    '/..',
    '/../../admin/secret',
    '/%2e%2e/%2e%2e/admin/secret',
    '/%2E./admin',
    '/v1/../../x',
    '/v1/..%2f..%2fadmin',
    '/v1/..%5c..%5cadmin',
    '/v1/..\\..\\admin',
    '/v1/..;/..;/admin',
    '/a//../..',
    '/a%2fb%2fc/../../..',
  ];
  for (const target of refused) {
    it(`${target} climbs above its root: null`, () => {
      expect(resolveDotSegments(target)).toBeNull();
    });
  }
});
