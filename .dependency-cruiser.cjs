// @ts-check
/**
 * Import boundaries of the workspace, after docs/architecture.md "Who may import whom" (CONTRIBUTING.md has
 * a summary).
 * Run by `pnpm lint` (`depcruise --config .dependency-cruiser.cjs ...`); scripts/test/boundaries.test.mjs
 * proves that each kind of violation below is reported.
 *
 * Paths in the rules are the *resolved* targets relative to the repository root: a workspace package
 * imported by name resolves (through the `factflow-source` export condition and pnpm's symlink) to
 * `packages/<name>/src/index.ts`, a relative import to the file it names, a third-party package to
 * `node_modules/.pnpm/<pkg>@<version>/node_modules/<pkg>/...`. An import that cannot be resolved keeps
 * its bare specifier (`amqplib`, `@factflow/engine`): pnpm links only what a package.json lists, so
 * "not resolvable from this package" is itself a violation (`not-resolvable`).
 *
 * Rules on third-party and workspace imports apply to `src/` (what a package ships); tests are free
 * (they use devDependencies), except that a provider's tests keep to the provider boundary plus the
 * testkit.
 * `apps/*` may import anything of the workspace; `bench/` and `examples/` are free except for the
 * rules that hold everywhere (no relative import into another package, no deep import).
 *
 * Dynamic imports: with `tsPreCompilationDeps` the TypeScript parser is used, which reports
 * `import("x")` and `import(\`x\`)` (a template literal without `${}`) like static imports, type-only
 * imports included. A computed specifier (`import(name)`, `import(\`@factflow/${x}\`)`) cannot be
 * resolved by any static tool: biome.json's plugin scripts/biome/no-computed-import.grit rejects those
 * in packages/*\/src, with an explicit per-file exception for the engine's operator-configured adapter
 * module loader.
 */

/** Workspace package folders: `packages/<x>`, `packages/infra/<x>`, `apps/<x>`. */
const PACKAGE_DIR = "packages/infra/[^/]+|packages/[^/]+|apps/[^/]+";
/** The folders under packages/ that have rules below (`infra` covers every provider, present or future). */
const KNOWN_PACKAGES = "protocols|provider-kit|engine|lineage|storage|adapters|runtime|infra";
/** A target inside the workspace: resolved into a workspace folder, or an unresolved `@factflow/` name. */
const WORKSPACE_TARGET = "^(packages|apps|bench|examples)/|^@factflow/";
/** A target outside the workspace (third-party); node builtins are excluded by dependencyTypesNot. */
const THIRD_PARTY = {
  dependencyTypesNot: ["local", "core"],
  pathNot: "^(packages|apps|bench|examples)/|^@factflow/",
};

/** Matches a third-party package (resolved into node_modules, or an unresolved bare name). */
const npm = (/** @type {string} */ names) => `(^|/node_modules/)(@types/)?(${names})(/|$)`;

const DATABASE_LIBS = "kysely|kysely-[^/]+|postgres|pg|@electric-sql/[^/]+";
const BROKER_CLIENTS = "amqplib|@stomp/[^/]+|pulsar-client|ioredis|redis|@redis/[^/]+";

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    // ---- holds everywhere ----------------------------------------------------------------------
    {
      name: "no-relative-import-across-packages",
      comment:
        "A relative import reaches into another package's folder. Import the other package by its name " +
        "(@factflow/...) and only where docs/architecture.md allows it.",
      severity: "error",
      from: { path: `^(${PACKAGE_DIR}|bench|examples)/` },
      to: { dependencyTypes: ["local"], path: "^(packages|apps|bench|examples)/", pathNot: "^$1/" },
    },
    {
      name: "no-deep-import",
      comment:
        "Deep import into another package's internals: import its public entry point " +
        '("@factflow/<name>", i.e. its src/index.ts) instead.',
      severity: "error",
      from: { path: `^(${PACKAGE_DIR}|bench|examples)/` },
      to: {
        path: `^@factflow/[^/]+/.|^(${PACKAGE_DIR})/`,
        pathNot: `^$1/|^(${PACKAGE_DIR})/(src/index\\.ts|package\\.json)$`,
      },
    },
    {
      name: "no-cycle",
      comment:
        "Import cycle in src/. Cycles made only partly of `import type` are erased at compile time and " +
        "allowed; a cycle of runtime imports is not.",
      severity: "error",
      from: { path: `^(${PACKAGE_DIR})/src/` },
      to: { circular: true, viaOnly: { dependencyTypesNot: ["type-only"] } },
    },
    {
      name: "no-package-cycle",
      comment:
        "Packages depend on each other in a cycle: this import leads into a package whose src/ imports " +
        "back into this one (checked on folders, so it also holds when no single module cycle exists).",
      severity: "error",
      scope: "folder",
      from: { path: `^(${PACKAGE_DIR})/src` },
      to: { circular: true, pathNot: "^$1/" },
    },
    {
      name: "not-resolvable",
      comment:
        "This import does not resolve from the importing package: the dependency is missing from its " +
        "package.json (pnpm links only what is listed) or the path is wrong.",
      severity: "error",
      from: { path: `^(${PACKAGE_DIR})/src/` },
      to: { couldNotResolve: true },
    },
    {
      name: "not-in-package-json",
      comment: "A third-party import that the importing package does not list in its package.json.",
      severity: "error",
      from: { path: `^(${PACKAGE_DIR})/src/` },
      // dependency-cruiser also reports a `peerDependenciesMeta` entry as npm-no-pkg: an optional
      // peer (listed in peerDependencies too) is listed.
      to: { dependencyTypes: ["npm-no-pkg", "npm-unknown"], dependencyTypesNot: ["npm-peer"] },
    },
    {
      name: "no-dev-dependency-in-src",
      comment:
        "src/ imports a package listed only in devDependencies: it ships, so list it in dependencies " +
        "(or peerDependencies).",
      severity: "error",
      from: { path: `^(${PACKAGE_DIR})/src/` },
      to: {
        dependencyTypes: ["npm-dev"],
        dependencyTypesNot: ["npm", "npm-peer", "npm-optional"],
        pathNot: "/node_modules/@types/",
      },
    },
    {
      name: "unclassified-package",
      comment:
        "A package under packages/ that .dependency-cruiser.cjs does not know: add its layer and allowed " +
        "imports there (docs/architecture.md, 'Who may import whom').",
      severity: "error",
      from: { path: `^packages/(?!(${KNOWN_PACKAGES})/)[^/]+/src/` },
      to: {},
    },

    // ---- protocols: nothing from the workspace; valibot and node builtins ----------------------
    {
      name: "protocols-imports-no-workspace-package",
      comment: "packages/protocols imports nothing from the workspace (docs/architecture.md).",
      severity: "error",
      from: { path: "^packages/protocols/src/" },
      to: { path: WORKSPACE_TARGET, pathNot: "^packages/protocols/|^@factflow/protocols$" },
    },
    {
      name: "protocols-third-party",
      comment: "packages/protocols may import only valibot and node builtins.",
      severity: "error",
      from: { path: "^packages/protocols/src/" },
      to: { ...THIRD_PARTY, pathNot: `${THIRD_PARTY.pathNot}|${npm("valibot")}` },
    },

    // ---- provider-kit: protocols only (+ valibot for its option schemas) -----------------------
    {
      name: "provider-kit-imports-only-protocols",
      comment:
        "packages/provider-kit imports only @factflow/protocols from the workspace (docs/architecture.md).",
      severity: "error",
      from: { path: "^packages/provider-kit/src/" },
      to: {
        path: WORKSPACE_TARGET,
        pathNot: "^packages/(provider-kit|protocols)/|^@factflow/(provider-kit|protocols)$",
      },
    },
    {
      name: "provider-kit-third-party",
      comment: "packages/provider-kit may import only valibot and node builtins.",
      severity: "error",
      from: { path: "^packages/provider-kit/src/" },
      to: { ...THIRD_PARTY, pathNot: `${THIRD_PARTY.pathNot}|${npm("valibot")}` },
    },

    // ---- infra/*: protocols, provider-kit and their own broker client --------------------------
    {
      name: "infra-imports-only-protocols-and-provider-kit",
      comment:
        "A provider (packages/infra/*) imports only @factflow/protocols and @factflow/provider-kit from " +
        "the workspace: never the engine, lineage, storage, adapters or another provider; the testkit " +
        "only from its tests (docs/architecture.md).",
      severity: "error",
      from: { path: "^packages/infra/([^/]+)/src/" },
      to: {
        path: WORKSPACE_TARGET,
        pathNot:
          "^packages/infra/$1/|^packages/(protocols|provider-kit)/|^@factflow/(protocols|provider-kit|infra-$1)$",
      },
    },
    {
      name: "infra-tests-import-only-protocols-provider-kit-testkit",
      comment:
        "A provider's tests may add @factflow/infra-testkit to what its src may import, nothing else of " +
        "the workspace (docs/architecture.md).",
      severity: "error",
      from: { path: "^packages/infra/([^/]+)/test/" },
      to: {
        path: WORKSPACE_TARGET,
        pathNot:
          "^packages/infra/($1|testkit)/|^packages/(protocols|provider-kit)/|^@factflow/(protocols|provider-kit|infra-testkit|infra-$1)$",
      },
    },
    {
      name: "infra-no-database-libraries",
      comment: "A provider does not talk to the database: kysely/postgres/PGlite belong to packages/lineage.",
      severity: "error",
      from: { path: "^packages/infra/[^/]+/src/" },
      to: { path: npm(DATABASE_LIBS) },
    },
    {
      name: "only-rabbitmq-uses-amqplib",
      comment: "amqplib is the broker client of packages/infra/rabbitmq, not of another provider.",
      severity: "error",
      from: { path: "^packages/infra/[^/]+/src/", pathNot: "^packages/infra/rabbitmq/" },
      to: { path: npm("amqplib") },
    },
    {
      name: "only-artemis-uses-stomp",
      comment: "@stomp/* is the broker client of packages/infra/artemis, not of another provider.",
      severity: "error",
      from: { path: "^packages/infra/[^/]+/src/", pathNot: "^packages/infra/artemis/" },
      to: { path: npm("@stomp/[^/]+") },
    },
    {
      name: "only-pulsar-uses-pulsar-client",
      comment: "pulsar-client is the broker client of packages/infra/pulsar, not of another provider.",
      severity: "error",
      from: { path: "^packages/infra/[^/]+/src/", pathNot: "^packages/infra/pulsar/" },
      to: { path: npm("pulsar-client") },
    },
    {
      name: "only-redis-uses-redis-client",
      comment: "Redis clients belong to packages/infra/redis, not to another provider.",
      severity: "error",
      from: { path: "^packages/infra/[^/]+/src/", pathNot: "^packages/infra/redis/" },
      to: { path: npm("ioredis|redis|@redis/[^/]+") },
    },

    // ---- engine: protocols only; valibot, yaml ----------------------------------------------
    {
      name: "engine-imports-only-protocols",
      comment:
        "packages/engine imports only @factflow/protocols from the workspace: providers, lineage and " +
        "storage are handed to it (docs/architecture.md).",
      severity: "error",
      from: { path: "^packages/engine/src/" },
      to: { path: WORKSPACE_TARGET, pathNot: "^packages/(engine|protocols)/|^@factflow/(engine|protocols)$" },
    },
    {
      name: "engine-third-party",
      comment:
        "packages/engine may import only valibot, yaml, uuid and node builtins (no kysely, no " +
        "broker clients).",
      severity: "error",
      from: { path: "^packages/engine/src/" },
      to: { ...THIRD_PARTY, pathNot: `${THIRD_PARTY.pathNot}|${npm("valibot|yaml|uuid")}` },
    },

    // ---- lineage, storage, adapters: protocols (+ their own libraries) -------------------------
    {
      name: "lineage-storage-adapters-import-only-protocols",
      comment:
        "packages/lineage, packages/storage and packages/adapters import only @factflow/protocols from " +
        "the workspace (docs/architecture.md).",
      severity: "error",
      from: { path: "^packages/(lineage|storage|adapters)/src/" },
      to: { path: WORKSPACE_TARGET, pathNot: "^packages/($1|protocols)/|^@factflow/($1|protocols)$" },
    },
    {
      name: "database-libraries-only-in-lineage",
      comment: "kysely/postgres/PGlite belong to packages/lineage (the apps compose it).",
      severity: "error",
      from: { path: "^packages/(protocols|provider-kit|engine|storage|adapters|runtime)/src/" },
      to: { path: npm(DATABASE_LIBS) },
    },
    {
      name: "broker-clients-only-in-providers",
      comment: "Broker clients belong to their provider under packages/infra/.",
      severity: "error",
      from: { path: "^packages/(protocols|provider-kit|engine|lineage|storage|adapters|runtime)/src/" },
      to: { path: npm(BROKER_CLIENTS) },
    },
    // ---- runtime: the composition root shared by the apps; never an app ---------------------------
    {
      name: "runtime-imports-no-app",
      comment:
        "packages/runtime composes the engine with providers, lineage and storage; it imports engine, " +
        "lineage, storage, adapters, protocols, provider-kit and the providers (packages/infra/*), never " +
        "apps/ (docs/architecture.md).",
      severity: "error",
      from: { path: "^packages/runtime/src/" },
      to: {
        path: WORKSPACE_TARGET,
        pathNot:
          "^packages/(runtime|engine|lineage|storage|adapters|protocols|provider-kit|infra/(?!testkit/)[^/]+)/|^@factflow/(runtime|engine|lineage|storage|adapters|protocols|provider-kit|infra-(?!testkit$)[^/]+)$",
      },
    },
  ],
  options: {
    // Only the workspace's own code is cruised; third-party modules are recorded but not followed.
    doNotFollow: { path: "(^|/)node_modules/" },
    // Build output and data folders of the workspace itself (not dist/ inside node_modules: those are the
    // third-party targets the rules look at).
    exclude: { path: `^(${PACKAGE_DIR}|bench|examples)/(dist|coverage|\\.turbo|\\.factflow)/` },
    // Use the TypeScript parser: type-only imports, `import type`, and `import(\`x\`)` are dependencies.
    tsPreCompilationDeps: true,
    parser: "tsc",
    skipAnalysisNotInRules: true,
    enhancedResolveOptions: {
      // Workspace packages resolve to their src/ like tests and typechecks do (no build needed).
      conditionNames: ["factflow-source", "import", "require", "node", "types", "default"],
      exportsFields: ["exports"],
      mainFields: ["module", "main", "types", "typings"],
      extensions: [".ts", ".mts", ".d.ts", ".js", ".mjs", ".cjs", ".json"],
    },
  },
};
