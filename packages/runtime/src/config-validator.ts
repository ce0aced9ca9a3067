import { adapters as builtinAdapters } from "@factflow/adapters";
import {
  createAdapterRegistry,
  loadPipelineConfig,
  type ModuleAccess,
  type ModuleImporter,
} from "@factflow/engine";
import type { AdapterDefinition, PipelineConfig } from "@factflow/protocols";
import type { ConfigParser } from "./config-catalog.js";
import type { Settings } from "./settings.js";

/** Where `adapter_modules` may load from: only the places the operator named in the settings. */
export function moduleAccessOf(settings: Settings): ModuleAccess {
  return {
    directories: settings.adapter_dirs,
    packages: settings.adapter_packages,
    hint: "set FACTFLOW_ADAPTER_DIRS (directories) or FACTFLOW_ADAPTER_PACKAGES (package names) when starting the server",
  };
}

/**
 * A parser that checks pipeline YAML exactly as the engine will run it (schema, adapter types,
 * `adapter_modules`, the settings' size limits) while opening nothing: no database, no broker, no
 * data-directory lock. `factflow config validate` uses it, so it works beside a running server.
 */
export function createConfigValidator(
  settings: Settings,
  options: { readonly adapters?: readonly AdapterDefinition[]; readonly importModule?: ModuleImporter } = {},
): ConfigParser {
  const registry = createAdapterRegistry([...builtinAdapters, ...(options.adapters ?? [])], {
    moduleAccess: moduleAccessOf(settings),
    ...(options.importModule === undefined ? {} : { importModule: options.importModule }),
  });
  return (source: string, path: string, label?: string): Promise<PipelineConfig> =>
    loadPipelineConfig(source, {
      path,
      ...(label === undefined ? {} : { label }),
      registry,
      maxRoutes: settings.config_max_routes,
      maxBytes: settings.config_max_bytes,
    });
}
