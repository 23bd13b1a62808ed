import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { idKey, idKeyOrNull, idOf } from '../../src/store/sqlite/id-keys.ts';

describe('idKey', () => {
  it('stores a canonical UUID as its 16 bytes, and idOf gives the UUID back', () => {
    for (let i = 0; i < 200; i++) {
      const id = randomUUID();
      const key = idKey(id);
      expect(Buffer.isBuffer(key)).toBe(true);
      expect((key as Buffer).equals(Buffer.from(id.replaceAll('-', ''), 'hex'))).toBe(true);
      expect(idOf(key)).toBe(id);
    }
    expect(idKey('00000000-0000-0000-0000-000000000000')).toEqual(Buffer.alloc(16));
    expect(idKey('ffffffff-ffff-ffff-ffff-ffffffffffff')).toEqual(Buffer.alloc(16, 0xff));
  });

  it('keeps any other id as its text, so that two ids never share a key', () => {
    const others = [
      '',
      'run-1',
      '0193A0B1-1111-7222-8333-444455556666', // uppercase: not how Keel writes a UUID
      '0193a0b1-1111-7222-8333-44445555666g',
      '0193a0b1-1111-7222-8333_444455556666',
      '0193a0b11111-7222-8333-4444555566666',
      '0193a0b1-1111-7222-8333-4444555566é6',
      '0193a0b1-1111-7222-8333-44445555666',
      '0193a0b1-1111-7222-8333-4444555566667',
      '{193a0b1-1111-7222-8333-444455556666',
    ];
    for (const id of others) {
      expect(idKey(id)).toBe(id);
      expect(idOf(idKey(id))).toBe(id);
    }
  });

  it('maps null and undefined to null', () => {
    expect(idKeyOrNull(null)).toBeNull();
    expect(idKeyOrNull(undefined)).toBeNull();
    expect(idKeyOrNull('x')).toBe('x');
  });
});
