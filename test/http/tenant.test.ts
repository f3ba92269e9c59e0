import { describe, it, expect } from 'vitest';
import { tenantOfRequest } from '../../src/http/edge/tenant.js';

const tenantFor = (headers: Record<string, string>): string => tenantOfRequest({ keyTenant: '', headers });

describe('tenantOfRequest', () => {
  it('item 2: tenants come from the whole credential, and no credential is a tenant of its own', () => {
    const tenants = [
      tenantFor({}),
      tenantFor({ authorization: 'Basic YWxpY2U6c2VjcmV0' }),
      tenantFor({ authorization: 'Basic Ym9iOnNlY3JldA==' }),
      tenantFor({ authorization: 'Bearer key with spaces one' }),
      tenantFor({ authorization: 'Bearer key with spaces two' }),
      tenantFor({ authorization: 'Bearer sk-one' }),
      tenantFor({ 'x-api-key': 'sk-one' }),
      tenantFor({ 'x-api-key': 'sk-two' }),
    ];
    expect(new Set(tenants).size).toBe(tenants.length);
    // The same credential is the same tenant, whatever else the request carries.
    expect(tenantFor({ authorization: 'Basic YWxpY2U6c2VjcmV0', 'content-type': 'application/json' })).toBe(tenants[1]);
    // A tenant names the credential without holding it.
    expect(tenants[5]).not.toContain('sk-one');
  });

  it('keeps the tenant the key check found', () => {
    expect(tenantOfRequest({ keyTenant: 'abcd', headers: { authorization: 'Bearer sk-one' } })).toBe('abcd');
  });
});
