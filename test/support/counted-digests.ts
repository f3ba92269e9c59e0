/**
 * Calls into node:crypto's digests (`hash`, `createHash`), counted for a test
 * file that mocks node:crypto with {@link countedCrypto}: how much hashing a
 * request does, as a count, never a time (issue 40).
 *
 *   vi.mock('node:crypto', async (importOriginal) => (await import('../support/counted-digests.js')).countedCrypto(importOriginal));
 */
type Crypto = typeof import('node:crypto');

export const digestCalls = { count: 0 };

export async function countedCrypto(importOriginal: <T>() => Promise<T>): Promise<Crypto> {
  const crypto = await importOriginal<Crypto>();
  const hash = ((...args: Parameters<Crypto['hash']>) => {
    digestCalls.count++;
    return crypto.hash(...args);
  }) as Crypto['hash'];
  const createHash: Crypto['createHash'] = (...args: Parameters<Crypto['createHash']>) => {
    digestCalls.count++;
    return crypto.createHash(...args);
  };
  return { ...crypto, default: { ...crypto, hash, createHash }, hash, createHash } as Crypto;
}
