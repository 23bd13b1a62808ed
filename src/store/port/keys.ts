/** API keys (stored hashed): the tenants' credentials. */

export interface ApiKeyRecord {
  id: string;
  tenant: string;
  name: string | null;
  /** SHA-256 of the secret: the secret itself is never stored. */
  hash: string;
  /** The first characters of the secret, to recognise it in listings. */
  prefix: string;
  ratePerMinute: number | null;
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
