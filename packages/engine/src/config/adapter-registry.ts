import {
  type Adapter,
  type AdapterDefinition,
  type AdapterFactoryContext,
  type AdapterModule,
  type JsonObject,
  PipelineError,
} from "@factflow/protocols";
import { checkModule, type ModuleAccess, NO_MODULE_ACCESS } from "./module-access.js";

/** A module of `adapter_modules` that could not be loaded. */
export interface ModuleLoadFailure {
  readonly index: number;
  readonly specifier: string;
  readonly message: string;
}

/** Adapter types by name: the built-ins handed in by the application plus user modules. */
export interface AdapterRegistry {
  get(type: string): AdapterDefinition | undefined;
  /** Every known type name, sorted. */
  types(): string[];
  /** Adds a definition; a second definition of the same type replaces the first. */
  register(definition: AdapterDefinition): void;
  /**
   * Imports each module (an absolute path, or a package name resolved from `baseDir`) and registers
   * its `adapters` export, after checking it against the registry's `ModuleAccess` (a refused module
   * is never imported). Returns the failures instead of throwing so config loading can list them.
   */
  loadModules(specifiers: readonly string[], baseDir?: string): Promise<ModuleLoadFailure[]>;
  /** Creates an adapter instance; throws `PipelineError` (`unknown_adapter`) for an unknown type. */
  create(type: string, config: JsonObject, context: AdapterFactoryContext): Promise<Adapter>;
}

/** Options of `createAdapterRegistry`. */
export interface AdapterRegistryOptions {
  /** Where `adapter_modules` may come from. @default NO_MODULE_ACCESS (nothing is imported) */
  readonly moduleAccess?: ModuleAccess;
  /**
   * Imports one allowed module by its URL, e.g. to compile a TypeScript module Node cannot import
   * by itself. @default the runtime's `import()`
   */
  readonly importModule?: ModuleImporter;
}

/** Imports a module by its URL (`file:` URL, or a package name resolved by Node). */
export type ModuleImporter = (url: string) => Promise<unknown>;

/** Builds a registry from adapter definitions (e.g. `adapters` of `@factflow/adapters`). */
export function createAdapterRegistry(
  definitions: readonly AdapterDefinition[] = [],
  options: AdapterRegistryOptions = {},
): AdapterRegistry {
  const access = options.moduleAccess ?? NO_MODULE_ACCESS;
  const importModule = options.importModule ?? ((url: string) => import(url));
  const byType = new Map<string, AdapterDefinition>();
  const loaded = new Set<string>();
  const registry: AdapterRegistry = {
    get: (type) => byType.get(type),
    types: () => [...byType.keys()].sort(),
    register(definition) {
      byType.set(definition.type, definition);
    },
    async loadModules(specifiers, baseDir = process.cwd()) {
      const failures: ModuleLoadFailure[] = [];
      for (const [index, specifier] of specifiers.entries()) {
        if (loaded.has(specifier)) continue;
        const checked = checkModule(specifier, baseDir, access);
        if (!checked.ok) {
          failures.push({ index, specifier, message: checked.message });
          continue;
        }
        try {
          const module = (await importModule(checked.url)) as Partial<AdapterModule>;
          if (!Array.isArray(module.adapters)) {
            failures.push({
              index,
              specifier,
              message: `module "${specifier}" has no "adapters" export; export const adapters: AdapterDefinition[] = [...]`,
            });
            continue;
          }
          for (const definition of module.adapters) registry.register(definition);
          loaded.add(specifier);
        } catch (error) {
          failures.push({
            index,
            specifier,
            message: `cannot load adapter module "${specifier}": ${(error as Error).message.split("\n")[0]}`,
          });
        }
      }
      return failures;
    },
    async create(type, config, context) {
      const definition = byType.get(type);
      if (definition === undefined) {
        throw new PipelineError(
          "unknown_adapter",
          `[factflow/engine] route "${context.route}" names unknown adapter "${type}". Known adapters: ${registry.types().join(", ")}`,
        );
      }
      return await definition.create(config, context);
    },
  };
  for (const definition of definitions) registry.register(definition);
  return registry;
}
