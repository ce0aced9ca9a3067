import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  ConfigError,
  type ExecutionStoreProtocol,
  FactflowError,
  type PipelineConfig,
} from "@factflow/protocols";

/** Parses and validates pipeline YAML; `path` locates relative `adapter_modules`. Throws `ConfigError`. */
/**
 * Parses and validates a config's YAML. `path` anchors relative `adapter_modules`; `label`, when
 * given, names the source in errors instead of `path` (an uploaded config is no file of its sender's).
 */
export type ConfigParser = (source: string, path: string, label?: string) => Promise<PipelineConfig>;

/** One config as the API describes it. */
export interface CatalogEntry {
  readonly name: string;
  /** `directory`: a YAML file in the config dir (unversioned); `uploaded`: stored versions. */
  readonly origin: "directory" | "uploaded";
  /** Latest uploaded version, `null` for directory configs. */
  readonly version: number | null;
  readonly versions: readonly number[];
  readonly description?: string;
  readonly routes: readonly string[];
  /** The file, for directory configs. */
  readonly path?: string;
}

/** A resolved config ready to run. */
export interface ResolvedConfig {
  readonly name: string;
  readonly version: number | null;
  readonly source: string;
  readonly config: PipelineConfig;
  /** Where relative `adapter_modules` resolve from. */
  readonly path: string;
}

interface DirectoryConfig {
  readonly path: string;
  readonly source: string;
  readonly config: PipelineConfig;
}

/**
 * Configs from a directory of YAML files plus versions uploaded through the API (kept in the
 * execution store). An uploaded version of a name shadows the directory file of the same name.
 */
export class ConfigCatalog {
  constructor(
    private readonly dir: string,
    private readonly store: ExecutionStoreProtocol,
    private readonly parse: ConfigParser,
  ) {}

  /** Reads every `*.yaml`/`*.yml` of the config dir. Files that do not validate are reported, not loaded. */
  async loadDirectory(): Promise<{
    configs: Map<string, DirectoryConfig>;
    problems: { path: string; message: string }[];
  }> {
    const configs = new Map<string, DirectoryConfig>();
    const problems: { path: string; message: string }[] = [];
    let files: string[];
    try {
      files = (await readdir(this.dir)).filter((f) => /\.ya?ml$/.test(f)).sort();
    } catch {
      return { configs, problems };
    }
    for (const file of files) {
      const path = join(this.dir, file);
      try {
        const source = await readFile(path, "utf8");
        const config = await this.parse(source, path);
        if (configs.has(config.name)) {
          problems.push({
            path,
            message: `config name "${config.name}" is already used by ${configs.get(config.name)?.path}`,
          });
          continue;
        }
        configs.set(config.name, { path, source, config });
      } catch (error) {
        problems.push({ path, message: error instanceof Error ? error.message : String(error) });
      }
    }
    return { configs, problems };
  }

  async list(): Promise<CatalogEntry[]> {
    const { configs } = await this.loadDirectory();
    const stored = await this.store.listConfigs();
    const byName = new Map<string, CatalogEntry>();
    for (const [name, entry] of configs) {
      byName.set(name, {
        name,
        origin: "directory",
        version: null,
        versions: [],
        ...(entry.config.description === undefined ? {} : { description: entry.config.description }),
        routes: Object.keys(entry.config.routes),
        path: entry.path,
      });
    }
    const uploaded = new Map<string, { versions: number[]; latest: (typeof stored)[number] }>();
    for (const row of stored) {
      const seen = uploaded.get(row.name);
      if (seen === undefined) uploaded.set(row.name, { versions: [row.version], latest: row });
      else {
        seen.versions.push(row.version);
        if (row.version > seen.latest.version) seen.latest = row;
      }
    }
    for (const [name, { versions, latest }] of uploaded) {
      byName.set(name, {
        name,
        origin: "uploaded",
        version: latest.version,
        versions: versions.sort((a, b) => a - b),
        ...(latest.parsed.description === undefined ? {} : { description: latest.parsed.description }),
        routes: Object.keys(latest.parsed.routes),
      });
    }
    return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The config to run under `name` (a specific uploaded version when given). */
  async resolve(name: string, version?: number): Promise<ResolvedConfig> {
    const virtualPath = join(this.dir, `${name}.yaml`);
    if (version !== undefined) {
      const stored = await this.store.getConfig(name, version);
      if (stored === undefined) throw notFound(name, version);
      return {
        name,
        version: stored.version,
        source: stored.source,
        config: stored.parsed,
        path: virtualPath,
      };
    }
    const latest = await this.store.getConfig(name);
    if (latest !== undefined) {
      return {
        name,
        version: latest.version,
        source: latest.source,
        config: latest.parsed,
        path: virtualPath,
      };
    }
    const { configs } = await this.loadDirectory();
    const entry = configs.get(name);
    if (entry === undefined) throw notFound(name);
    return { name, version: null, source: entry.source, config: entry.config, path: entry.path };
  }

  /** Validates YAML without storing it; throws `ConfigError` with every issue. */
  validate(source: string): Promise<PipelineConfig> {
    return this.parse(source, join(this.dir, "uploaded.yaml"), "(uploaded)");
  }

  /** Stores a new version of `name` (the YAML's own `name` must match). */
  async upload(name: string, source: string): Promise<ResolvedConfig> {
    const config = await this.validate(source);
    if (config.name !== name) {
      throw new ConfigError(`[factflow/server] config "${name}"`, [
        { path: "name", message: `is "${config.name}" but the upload is for "${name}"; make them match` },
      ]);
    }
    const stored = await this.store.saveConfig(name, source, config);
    return { name, version: stored.version, source, config, path: join(this.dir, `${name}.yaml`) };
  }
}

function notFound(name: string, version?: number): FactflowError {
  const what = version === undefined ? `config "${name}"` : `version ${version} of config "${name}"`;
  return new FactflowError(
    "config_not_found",
    `[factflow/server] ${what} does not exist; list configs with GET /api/v1/configs or upload it with PUT /api/v1/configs/${name}`,
  );
}
