import { describe, expect, it } from "vitest";
import { chooseServiceSource, findContainerEngine, resolveService, SERVICES } from "../src/index.js";

const pg = SERVICES.postgres;

describe("chooseServiceSource", () => {
  it("takes the URL from env whether or not a container engine runs", () => {
    const env = { DATABASE_URL: "postgres://db.example:5432/x" };
    for (const engine of [undefined, "unix:///var/run/docker.sock"]) {
      expect(chooseServiceSource(pg, env, engine)).toMatchObject({
        kind: "url",
        url: "postgres://db.example:5432/x",
      });
    }
  });

  it("starts a container when no URL is given and an engine runs", () => {
    expect(chooseServiceSource(pg, { DATABASE_URL: " " }, "unix:///var/run/docker.sock")).toMatchObject({
      kind: "container",
      image: "postgres:15-alpine",
    });
  });

  it("falls back to the machine's service without URL and engine", () => {
    const source = chooseServiceSource(pg, {}, undefined);
    expect(source).toMatchObject({ kind: "url", url: pg.defaultUrl });
    expect(source.reason).toContain("no container engine");
  });
});

describe("findContainerEngine", () => {
  it("reads DOCKER_HOST, then the usual sockets, and honours FACTFLOW_NO_CONTAINERS", () => {
    const none = () => false;
    expect(findContainerEngine({ DOCKER_HOST: "tcp://10.0.0.2:2375" }, none)).toBe("tcp://10.0.0.2:2375");
    expect(findContainerEngine({}, none)).toBeUndefined();
    expect(findContainerEngine({}, (p) => p === "/var/run/docker.sock")).toBe("unix:///var/run/docker.sock");
    expect(findContainerEngine({ XDG_RUNTIME_DIR: "/run/user/7" }, (p) => p.includes("podman"))).toBe(
      "unix:///run/user/7/podman/podman.sock",
    );
    expect(
      findContainerEngine({ FACTFLOW_NO_CONTAINERS: "1", DOCKER_HOST: "tcp://x:1" }, none),
    ).toBeUndefined();
  });
});

describe("resolveService", () => {
  it("resolves to the env URL without starting anything", async () => {
    const resolved = await resolveService(SERVICES.redis, { FACTFLOW_REDIS_URL: "redis://10.0.0.3:6379" });
    expect(resolved.url).toBe("redis://10.0.0.3:6379");
    await resolved.stop();
  });
});
