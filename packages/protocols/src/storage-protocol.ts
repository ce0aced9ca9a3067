/** Where an artefact came from; recorded in its sidecar. */
export interface ArtefactOrigin {
  readonly executionId?: string;
  readonly route?: string;
  /** The lineage row of the adapter invocation that wrote it. */
  readonly lineageId?: string;
}

/** The JSON sidecar stored next to every artefact. */
export interface ArtefactSidecar extends ArtefactOrigin {
  readonly key: string;
  readonly contentType: string;
  readonly size: number;
  /** Hex sha256 of the bytes. */
  readonly sha256: string;
  readonly createdAt: string;
}

export interface PutOptions extends ArtefactOrigin {
  /** @default "application/octet-stream" (or "text/plain; charset=utf-8" for strings) */
  readonly contentType?: string;
}

/**
 * Artefact storage. Keys are `/`-separated relative paths (no `..`, no empty or encoded-slash
 * segments, not absolute); an invalid key is rejected with `storage_key_invalid`. Writes are atomic.
 */
export interface StorageProtocol {
  put(key: string, data: Uint8Array | string, options?: PutOptions): Promise<ArtefactSidecar>;
  get(key: string): Promise<{ data: Uint8Array; sidecar: ArtefactSidecar } | undefined>;
  head(key: string): Promise<ArtefactSidecar | undefined>;
  /** Sidecars of every artefact whose key starts with `prefix`, sorted by key. */
  list(prefix?: string): Promise<readonly ArtefactSidecar[]>;
  delete(key: string): Promise<boolean>;
  /** Human-readable location, e.g. the root directory. */
  describe(): string;
}
