import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { loadSettings, redactSettings, redactUrl } from "../src/settings.js";

function settingsError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

describe("loadSettings", () => {
  it("reads FACTFLOW_RETENTION_DAYS and rejects a negative or non-integer value", () => {
    expect(loadSettings({ env: { FACTFLOW_RETENTION_DAYS: "30" }, cwd: "/srv" }).retention_days).toBe(30);
    for (const bad of ["-1", "1.5", "soon"]) {
      const error = settingsError(() => loadSettings({ env: { FACTFLOW_RETENTION_DAYS: bad }, cwd: "/srv" }));
      expect(error.issues).toHaveLength(1);
      expect(error.issues[0]?.path).toBe("retention_days");
      expect(error.issues[0]?.message).toContain("FACTFLOW_RETENTION_DAYS");
    }
  });

  it("applies the documented defaults", () => {
    const s = loadSettings({ env: {}, cwd: "/srv/app" });
    expect(s).toMatchObject({
      provider: "embedded",
      embedded_mode: "file",
      data_dir: "/srv/app/.factflow",
      storage_root: "/srv/app/.factflow/artefacts",
      config_dir: "/srv/app/configs",
      max_concurrent: 10,
      host: "127.0.0.1",
      port: 8000,
      body_limit_bytes: 1024 * 1024,
      retention_days: 0,
      stall_after_s: 30,
    });
    expect(s.database_url).toBeUndefined();
    expect(s.api_token).toBeUndefined();
    expect(Object.isFrozen(s)).toBe(true);
  });

  it("reads FACTFLOW_* env and coerces numbers", () => {
    const s = loadSettings({
      env: {
        FACTFLOW_PROVIDER: "rabbitmq",
        FACTFLOW_RABBITMQ_URL: "amqp://guest:guest@127.0.0.1:5672",
        FACTFLOW_MAX_CONCURRENT: "3",
        FACTFLOW_PORT: "9000",
        FACTFLOW_DATA_DIR: "/var/lib/factflow",
      },
      cwd: "/srv",
    });
    expect(s.provider).toBe("rabbitmq");
    expect(s.max_concurrent).toBe(3);
    expect(s.port).toBe(9000);
    expect(s.storage_root).toBe("/var/lib/factflow/artefacts");
  });

  it("reads a YAML settings file, with env winning over it", () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-settings-"));
    const file = join(dir, "settings.yaml");
    writeFileSync(
      file,
      "provider: artemis\nartemis_url: stomp://127.0.0.1:61613\nmax_concurrent: 4\nport: 8100\n",
    );
    const s = loadSettings({ env: { FACTFLOW_PORT: "8200" }, file, cwd: dir });
    expect(s.provider).toBe("artemis");
    expect(s.max_concurrent).toBe(4);
    expect(s.port).toBe(8200);
  });

  it("reports one message per problem, naming the variable", () => {
    const error = settingsError(() =>
      loadSettings({
        env: { FACTFLOW_PROVIDER: "kafka", FACTFLOW_MAX_CONCURRENT: "zero", FACTFLOW_PORT: "70000" },
      }),
    );
    const paths = error.issues.map((i) => i.path).sort();
    expect(paths).toEqual(["max_concurrent", "port", "provider"]);
    expect(error.message).toContain("FACTFLOW_PROVIDER");
    expect(error.message).toContain("must be one of embedded, rabbitmq, artemis, pulsar");
    expect(error.message).toContain("must be at most 65535");
  });

  it("requires the broker URL of the chosen provider", () => {
    const error = settingsError(() => loadSettings({ env: { FACTFLOW_PROVIDER: "rabbitmq" } }));
    expect(error.issues).toHaveLength(1);
    expect(error.issues[0]?.path).toBe("rabbitmq_url");
  });

  it("checks broker URL schemes", () => {
    const error = settingsError(() =>
      loadSettings({
        env: {
          FACTFLOW_PROVIDER: "artemis",
          FACTFLOW_ARTEMIS_URL: "tcp://127.0.0.1:61613",
          FACTFLOW_RABBITMQ_URL: "http://x",
        },
      }),
    );
    expect(error.issues.map((i) => i.path).sort()).toEqual(["artemis_url", "rabbitmq_url"]);
    expect(error.message).toContain("must start with stomp://");
  });

  it("reads a JSON settings file and reports an unreadable one", () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-settings-"));
    writeFileSync(join(dir, "s.json"), JSON.stringify({ provider: "embedded", embedded_mode: "memory" }));
    expect(loadSettings({ env: {}, file: "s.json", cwd: dir }).embedded_mode).toBe("memory");
    const error = settingsError(() => loadSettings({ env: {}, file: "missing.yaml", cwd: dir }));
    expect(error.message).toContain("cannot be read (ENOENT)");
    writeFileSync(join(dir, "bad.yaml"), "provider: [unclosed");
    expect(settingsError(() => loadSettings({ env: {}, file: "bad.yaml", cwd: dir })).message).toContain(
      "not valid YAML",
    );
  });

  it("reads the pulsar settings, and refuses a pulsar URL that is not ws://", () => {
    const s = loadSettings({
      env: {
        FACTFLOW_PROVIDER: "pulsar",
        FACTFLOW_PULSAR_URL: "ws://127.0.0.1:8081",
        FACTFLOW_PULSAR_TENANT: "acme",
        FACTFLOW_PULSAR_NAMESPACE: "factflow",
      },
    });
    expect(s.provider).toBe("pulsar");
    expect([s.pulsar_url, s.pulsar_tenant, s.pulsar_namespace]).toEqual([
      "ws://127.0.0.1:8081",
      "acme",
      "factflow",
    ]);
    const error = settingsError(() =>
      loadSettings({ env: { FACTFLOW_PROVIDER: "pulsar", FACTFLOW_PULSAR_URL: "pulsar://127.0.0.1:6650" } }),
    );
    expect(error.issues[0]?.path).toBe("pulsar_url");
  });

  it("never echoes secrets in errors", () => {
    const error = settingsError(() =>
      loadSettings({ env: { FACTFLOW_API_TOKEN: "short", FACTFLOW_DATABASE_URL: "mysql://u:hunter2@h/db" } }),
    );
    expect(error.issues.map((i) => i.path).sort()).toEqual(["api_token", "database_url"]);
    expect(error.message).not.toContain('short"');
    expect(error.message).not.toContain("hunter2");
  });

  it("redacts secrets and URL passwords for printing", () => {
    const s = loadSettings({
      env: {
        FACTFLOW_PROVIDER: "artemis",
        FACTFLOW_ARTEMIS_URL: "stomp://127.0.0.1:61613",
        FACTFLOW_ARTEMIS_PASSWORD: "artemis-secret",
        FACTFLOW_DATABASE_URL: "postgres://app:db-secret@db:5432/factflow",
        FACTFLOW_API_TOKEN: "token-secret-123",
      },
    });
    const printed = JSON.stringify(redactSettings(s));
    expect(printed).not.toContain("artemis-secret");
    expect(printed).not.toContain("db-secret");
    expect(printed).not.toContain("token-secret-123");
    expect(printed).toContain("postgres://app:<redacted>@db:5432/factflow");
    expect(redactUrl("amqp://guest:guest@127.0.0.1:5672")).toBe("amqp://guest:<redacted>@127.0.0.1:5672");
    expect(redactUrl("amqp://127.0.0.1:5672")).toBe("amqp://127.0.0.1:5672");
  });

  it("reads provider redis with FACTFLOW_REDIS_URL (optional: the local default) and checks its scheme", () => {
    expect(loadSettings({ env: { FACTFLOW_PROVIDER: "redis" } }).redis_url).toBeUndefined();
    const s = loadSettings({
      env: { FACTFLOW_PROVIDER: "redis", FACTFLOW_REDIS_URL: "redis://:pw123@cache:6379/2" },
    });
    expect(s.provider).toBe("redis");
    expect(s.redis_url).toBe("redis://:pw123@cache:6379/2");
    const error = settingsError(() =>
      loadSettings({ env: { FACTFLOW_PROVIDER: "redis", FACTFLOW_REDIS_URL: "http://cache:6379" } }),
    );
    expect(error.issues.map((i) => i.path)).toEqual(["redis_url"]);
    expect(error.message).toContain("must start with redis://");
  });
});
