/** API keys (stored hashed): the tenants' credentials, and the operators' (admin scope). */
import type { TenantQuotas } from './tenants.ts';

/**
 * What a key may do: `tenant` (every key before scopes) acts for its tenant; `admin` manages the
 * tenants registry and keys (`/v1/tenants`) and nothing else.
 */
export type ApiKeyScope = 'tenant' | 'admin';
export const API_KEY_SCOPES: readonly ApiKeyScope[] = ['tenant', 'admin'];

export interface ApiKeyRecord {
  id: string;
  tenant: string;
  name: string | null;
  /** SHA-256 of the secret: the secret itself is never stored. */
  hash: string;
  /** The first characters of the secret, to recognise it in listings. */
  prefix: string;
  ratePerMinute: number | null;
  scope: ApiKeyScope;
  /** The key's own limits, within its tenant's (null: only the tenant's). */
  quotas: TenantQuotas | null;
  createdAt: number;
  revokedAt: number | null;
}

/** The API keys namespace of the port (`store.keys`). */
export interface KeyOps {
  create(k: ApiKeyRecord): Promise<void>;
  find(hash: string): Promise<ApiKeyRecord | undefined>;
  list(tenant?: string): Promise<ApiKeyRecord[]>;
  /** False when there is no such key. */
  revoke(id: string, at: number): Promise<boolean>;
}
