import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, type Tags } from "yaml";
import { ENVIRONMENT_ONLY_VARIABLES, loadSettings, SETTING_VARIABLES } from "../src/settings.js";

// The Docker Compose files set the server's environment; a variable the server does not read (a
// typo, a setting renamed) would be ignored without a word. Every FACTFLOW_* variable they set must
// be a setting or one of the environment-only variables, and the values they default to must pass
// the settings schema.

const DOCKER = resolve(import.meta.dirname, "../../../docker");
/** The server files: compose.yaml alone, and with compose.cluster.yaml on top (N servers). */
const FILES = ["compose.yaml", "compose.cluster.yaml"] as const;

/** Compose's merge tags (`!override`, `!reset`) read as the plain value they carry. */
const composeTags: Tags = [
  { tag: "!override", collection: "seq", resolve: (value) => value },
  { tag: "!override", collection: "map", resolve: (value) => value },
  { tag: "!reset", collection: "seq", resolve: (value) => value },
  { tag: "!reset", resolve: (value: string) => value },
];

type Environment = Record<string, string | number | boolean | null>;

function serverEnvironment(file: string): Environment {
  const doc = parse(readFileSync(resolve(DOCKER, file), "utf8"), { customTags: composeTags }) as {
    services?: { server?: { environment?: Environment | string[] } };
  };
  const env = doc.services?.server?.environment;
  if (env === undefined) throw new Error(`${file}: no services.server.environment`);
  if (!Array.isArray(env)) return env;
  return Object.fromEntries(env.map((entry) => entry.split(/=(.*)/s).slice(0, 2) as [string, string]));
}

/** The value compose substitutes when the variable is not set in the caller's environment. */
function withDefaults(value: string): string {
  return value.replace(
    /\$\{[A-Z0-9_]+(?::?-([^}]*))?\}/g,
    (_, fallback: string | undefined) => fallback ?? "",
  );
}

describe("Docker Compose files and the server settings", () => {
  const known = new Set([...SETTING_VARIABLES, ...ENVIRONMENT_ONLY_VARIABLES]);

  for (const file of FILES) {
    it(`${file}: every FACTFLOW_* variable is a server setting or an environment-only variable`, () => {
      const names = Object.keys(serverEnvironment(file)).filter((name) => name.startsWith("FACTFLOW_"));
      expect(names.length).toBeGreaterThan(0);
      expect(names.filter((name) => !known.has(name))).toEqual([]);
    });
  }

  it("the merged environment (N servers) passes the settings schema with compose's defaults", () => {
    const merged: Record<string, string> = {};
    for (const file of FILES)
      for (const [name, value] of Object.entries(serverEnvironment(file)))
        merged[name] = withDefaults(String(value ?? ""));
    // The Dockerfile binds beyond loopback; the compose file leaves the token empty by default.
    const settings = loadSettings({ env: { ...merged, FACTFLOW_INSECURE: "1" }, cwd: "/" });
    expect(settings.provider).toBe("rabbitmq");
    expect(settings.database_url).toMatch(/^postgres:\/\//);
    const lease = Number(merged.FACTFLOW_CLUSTER_LEASE_MS);
    expect(Number.isInteger(lease) && lease >= 1000).toBe(true);
    expect(Number(merged.FACTFLOW_CLUSTER_MAX_RUNNING)).toBeGreaterThanOrEqual(1);
  });

  it("every environment-only variable is read by the server", () => {
    const sources = ["compose.ts", "settings.ts", "cluster-lease.ts"]
      .map((f) => readFileSync(resolve(import.meta.dirname, "../src", f), "utf8"))
      .join("\n");
    for (const name of ENVIRONMENT_ONLY_VARIABLES) expect(sources.includes(`env.${name}`), name).toBe(true);
  });
});
