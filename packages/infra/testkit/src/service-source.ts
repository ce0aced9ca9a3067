import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** A service an integration test needs, and how to run it in a container. */
export interface ServiceSpec {
  /** Shown in messages, e.g. `"PostgreSQL"`. */
  readonly name: string;
  /** The env variable that names its URL, e.g. `DATABASE_URL`. */
  readonly envVar: string;
  /** The URL used when the env variable is unset and no container engine runs (the machine's service). */
  readonly defaultUrl: string;
  /** The container image started by testcontainers, e.g. `postgres:15-alpine`. */
  readonly image: string;
  /** The port the service listens on inside the container. */
  readonly port: number;
  /** Environment of the container. */
  readonly environment?: Readonly<Record<string, string>>;
  /** A log line that says the service is ready (waited for twice when `logTimes` is 2). */
  readonly readyLog?: string;
  readonly logTimes?: number;
  /** Builds the URL from the container's host and mapped port. */
  url(host: string, port: number): string;
}

/** Where a test takes its service from, and why. */
export type ServiceSource =
  | { readonly kind: "url"; readonly url: string; readonly reason: string }
  | { readonly kind: "container"; readonly image: string; readonly reason: string };

/**
 * The choice, as a pure function: an explicit URL always wins; otherwise a container when an engine
 * runs; otherwise the machine's own service at the default URL (which the test probes, then skips or,
 * under `FACTFLOW_REQUIRE_SERVICES=1`, fails).
 */
export function chooseServiceSource(
  spec: Pick<ServiceSpec, "envVar" | "defaultUrl" | "image">,
  env: Readonly<Record<string, string | undefined>>,
  containerEngine: string | undefined,
): ServiceSource {
  const explicit = env[spec.envVar]?.trim();
  if (explicit !== undefined && explicit !== "")
    return { kind: "url", url: explicit, reason: `${spec.envVar} is set` };
  if (containerEngine !== undefined)
    return {
      kind: "container",
      image: spec.image,
      reason: `${spec.envVar} is unset and a container engine answers at ${containerEngine}`,
    };
  return {
    kind: "url",
    url: spec.defaultUrl,
    reason: `${spec.envVar} is unset and no container engine was found: using the machine's service`,
  };
}

/**
 * Where a Docker-compatible engine listens, or undefined: `DOCKER_HOST`, then the usual Docker and
 * Podman sockets. `FACTFLOW_NO_CONTAINERS=1` turns containers off.
 */
export function findContainerEngine(
  env: Readonly<Record<string, string | undefined>> = process.env,
  exists: (path: string) => boolean = existsSync,
): string | undefined {
  if (env.FACTFLOW_NO_CONTAINERS === "1") return undefined;
  const host = env.DOCKER_HOST?.trim();
  if (host !== undefined && host !== "") return host;
  const runtimeDir = env.XDG_RUNTIME_DIR;
  const sockets = [
    "/var/run/docker.sock",
    join(homedir(), ".docker", "run", "docker.sock"),
    ...(runtimeDir === undefined ? [] : [join(runtimeDir, "podman", "podman.sock")]),
  ];
  const found = sockets.find((socket) => exists(socket));
  return found === undefined ? undefined : `unix://${found}`;
}

/** A resolved service: its URL, and `stop()` for the container started for it (a no-op otherwise). */
export interface ResolvedService {
  readonly url: string;
  readonly source: ServiceSource;
  stop(): Promise<void>;
}

/**
 * Resolves the URL of `spec`'s service: the env URL, else a container started through testcontainers
 * (an optional peer dependency) when an engine runs, else the default URL.
 */
export async function resolveService(
  spec: ServiceSpec,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<ResolvedService> {
  const source = chooseServiceSource(spec, env, findContainerEngine(env));
  if (source.kind === "url") return { url: source.url, source, stop: async () => {} };
  let testcontainers: typeof import("testcontainers");
  try {
    testcontainers = await import("testcontainers");
  } catch (error) {
    throw new Error(
      `[testkit] ${spec.name}: ${source.reason}, but the testcontainers package is not installed. ` +
        `Add it as a dev dependency, or set ${spec.envVar} to a running ${spec.name}.`,
      { cause: error },
    );
  }
  let container = new testcontainers.GenericContainer(spec.image)
    .withExposedPorts(spec.port)
    .withEnvironment({ ...spec.environment });
  if (spec.readyLog !== undefined)
    container = container.withWaitStrategy(
      testcontainers.Wait.forLogMessage(spec.readyLog, spec.logTimes ?? 1),
    );
  const started = await container.start();
  return {
    url: spec.url(started.getHost(), started.getMappedPort(spec.port)),
    source,
    async stop() {
      await started.stop();
    },
  };
}

/** The services of Factflow's integration tests, as they run on the development machines. */
export const SERVICES = {
  postgres: {
    name: "PostgreSQL",
    envVar: "DATABASE_URL",
    defaultUrl: "postgres://postgres@127.0.0.1:5432/postgres",
    image: "postgres:15-alpine",
    port: 5432,
    environment: { POSTGRES_HOST_AUTH_METHOD: "trust" },
    readyLog: "database system is ready to accept connections",
    logTimes: 2,
    url: (host, port) => `postgres://postgres@${host}:${port}/postgres`,
  },
  rabbitmq: {
    name: "RabbitMQ",
    envVar: "RABBITMQ_URL",
    defaultUrl: "amqp://guest:guest@127.0.0.1:5672",
    image: "rabbitmq:3.10-management-alpine",
    port: 5672,
    readyLog: "Server startup complete",
    url: (host, port) => `amqp://guest:guest@${host}:${port}`,
  },
  redis: {
    name: "Redis",
    envVar: "FACTFLOW_REDIS_URL",
    defaultUrl: "redis://127.0.0.1:6379",
    image: "redis:7-alpine",
    port: 6379,
    readyLog: "Ready to accept connections",
    url: (host, port) => `redis://${host}:${port}`,
  },
} as const satisfies Record<string, ServiceSpec>;
