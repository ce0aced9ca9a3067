import { mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { adapters } from "@factflow/adapters";
import { ConfigError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createAdapterRegistry, loadPipelineConfig } from "../src/index.js";

const registry = () => createAdapterRegistry(adapters);

const VALID = `
name: demo
init:
  route: start
  message: { items: [1, 2, 3] }
routes:
  start:
    inbound: { queue: start.in }
    adapters:
      - type: split
        config: { field: items }
    outbound: [collect.in]
  collect:
    inbound: { queue: collect.in, concurrency: 2 }
    adapters:
      - type: batch
        config: { size: 3 }
`;

async function issuesOf(
  source: string,
  options: Parameters<typeof loadPipelineConfig>[1] = { registry: registry() },
) {
  try {
    await loadPipelineConfig(source, options);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).issues;
  }
  throw new Error("expected a ConfigError");
}

describe("loadPipelineConfig", () => {
  it("parses a valid config, applies the schema defaults and freezes it", async () => {
    const config = await loadPipelineConfig(VALID, { registry: registry() });
    expect(config.settings.max_handlers).toBe(30);
    expect(config.settings.max_fanout_pending).toBe(500);
    expect(config.settings.retry.max_attempts).toBe(3);
    expect(config.routes.start?.inbound.concurrency).toBe(1);
    expect(config.routes.start?.inbound.prefetch).toBe(10);
    expect(config.routes.collect?.outbound).toEqual([]);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.routes.start?.adapters)).toBe(true);
  });

  it("lists every semantic problem with its YAML path and line", async () => {
    const source = `name: bad
init:
  route: nowhere
routes:
  a:
    inbound: { queue: a.in }
    adapters:
      - type: md_split
      - type: batch
        config: { size: 0 }
    outbound: [missing.in, b.in]
  b:
    inbound: { queue: a.in }
    adapters: [{ type: passthrough }]
`;
    const issues = await issuesOf(source);
    const byPath = Object.fromEntries(issues.map((i) => [i.path, i]));
    expect(byPath["routes.a.adapters[0].type"]?.message).toMatch(
      /unknown adapter "md_split". Known adapters: batch, delay/,
    );
    expect(byPath["routes.a.adapters[0].type"]?.line).toBe(8);
    expect(byPath["routes.a.adapters[1].config"]?.message).toMatch(/size/);
    expect(byPath["routes.a.adapters[1].config"]?.line).toBe(10);
    expect(byPath["routes.a.outbound[0]"]?.message).toMatch(/no route reads outbound queue "missing.in"/);
    expect(byPath["routes.a.outbound[0]"]?.line).toBe(11);
    expect(byPath["routes.b.inbound.queue"]?.message).toMatch(/already the inbound queue of route "a"/);
    expect(byPath["routes.b.inbound.queue"]?.line).toBe(13);
    expect(byPath["init.route"]?.message).toMatch(/init route "nowhere" does not exist/);
    expect(byPath["init.route"]?.line).toBe(3);
  });

  it("rejects wrong types with the path and line of each", async () => {
    const source = `name: t
settings:
  max_handlers: many
init: { route: a }
routes:
  a:
    inbound: { queue: a.in, concurrency: -1 }
    adapters: [{ type: passthrough }]
    unknown_key: 1
`;
    const issues = await issuesOf(source);
    const paths = issues.map((i) => `${i.path}@${i.line}`);
    expect(paths).toContain("settings.max_handlers@3");
    expect(paths).toContain("routes.a.inbound.concurrency@7");
    expect(issues.some((i) => i.path.startsWith("routes.a") && i.line === 9)).toBe(true);
  });

  it("names an unknown key and, on an adapter step, says that settings go under config", async () => {
    const source = VALID.replace(
      "inbound: { queue: start.in }",
      "inbound: { queue: start.in, concurency: 2 }",
    ).replace(
      "      - type: split\n        config: { field: items }",
      "      - type: split\n        field: items",
    );
    const issues = await issuesOf(source);
    expect(issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          path: "routes.start.inbound.concurency",
          line: 8,
          message: expect.stringMatching(/^unknown key "concurency"/),
        }),
        expect.objectContaining({
          path: "routes.start.adapters[0].field",
          message: expect.stringContaining("adapter settings go under config"),
        }),
      ]),
    );
  });

  it("rejects a route cycle with no way out, and accepts one through a filter or with an exit", async () => {
    const cycle = `name: c
init: { route: a }
routes:
  a:
    inbound: { queue: a.in }
    adapters: [{ type: passthrough }]
    outbound: [b.in]
  b:
    inbound: { queue: b.in }
    adapters: [{ type: passthrough }]
    outbound: [a.in]
`;
    const issues = await issuesOf(cycle);
    expect(issues).toHaveLength(1);
    expect(issues[0]?.message).toMatch(/"a" → "b" → "a" form a cycle with no way out/);
    const withFilter = cycle.replace(
      "adapters: [{ type: passthrough }]\n    outbound: [a.in]",
      "adapters: [{ type: filter, config: { field: again, equals: true } }]\n    outbound: [a.in]",
    );
    await expect(loadPipelineConfig(withFilter, { registry: registry() })).resolves.toBeDefined();
    const withExit =
      `${cycle}    \n  sink:\n    inbound: { queue: sink.in }\n    adapters: [{ type: passthrough }]\n`.replace(
        "outbound: [a.in]",
        "outbound: [a.in, sink.in]",
      );
    await expect(loadPipelineConfig(withExit, { registry: registry() })).resolves.toBeDefined();
  });

  it("rejects YAML alias bombs and oversized files before parsing further", async () => {
    const bomb = [
      "a: &a [x, x, x, x, x, x, x, x, x]",
      "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]",
      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
      "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]",
      "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]",
      "f: [*e, *e, *e, *e, *e, *e, *e, *e, *e]",
    ].join("\n");
    const bombIssues = await issuesOf(bomb);
    expect(bombIssues[0]?.message).toMatch(/aliases/);
    const big = `name: x\n# ${"y".repeat(2000)}\n`;
    const sizeIssues = await issuesOf(big, { maxBytes: 1000 });
    expect(sizeIssues[0]?.message).toMatch(/over the 1000-byte limit/);
  });

  it("reports YAML syntax errors with their line", async () => {
    const issues = await issuesOf("name: x\nroutes:\n  a: [1, 2\n");
    expect(issues[0]?.message).toMatch(/YAML syntax/);
    expect(issues[0]?.line).toBeGreaterThanOrEqual(3);
  });

  it("loads user adapters from a module path relative to the config file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-engine-"));
    writeFileSync(
      join(dir, "my-adapters.mjs"),
      `export const adapters = [{ type: "shout", description: "upper-case", create: () => ({ type: "shout", process: (ctx) => ({ data: String(ctx.message).toUpperCase() }) }) }];\n`,
    );
    const source = `name: u\nadapter_modules: [./my-adapters.mjs]\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters: [{ type: shout }]\n`;
    const access = { directories: [dir], packages: [] };
    const reg = createAdapterRegistry(adapters, { moduleAccess: access });
    const config = await loadPipelineConfig(source, { path: join(dir, "pipeline.yaml"), registry: reg });
    expect(config.adapter_modules).toEqual([join(dir, "my-adapters.mjs")]);
    expect(reg.get("shout")?.description).toBe("upper-case");
    const missing = await issuesOf(source.replace("./my-adapters.mjs", "./nope.mjs"), {
      path: join(dir, "p.yaml"),
      registry: createAdapterRegistry(adapters, { moduleAccess: access }),
    });
    expect(missing.map((i) => i.path)).toContain("adapter_modules[0]");
    expect(missing.some((i) => i.message.includes('unknown adapter "shout"'))).toBe(true);
  });

  it("imports an allowed module through the registry's importModule, and never a refused one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-engine-"));
    writeFileSync(join(dir, "my-adapters.ts"), "// compiled by the importer below\n");
    writeFileSync(
      join(dir, "compiled.mjs"),
      `export const adapters = [{ type: "compiled", create: () => ({}) }];\n`,
    );
    const imported: string[] = [];
    const reg = createAdapterRegistry([], {
      moduleAccess: { directories: [dir], packages: [] },
      importModule: async (url) => {
        imported.push(url);
        return import(pathToFileURL(join(dir, "compiled.mjs")).href);
      },
    });
    expect(await reg.loadModules(["./my-adapters.ts"], dir)).toEqual([]);
    expect(imported).toEqual([pathToFileURL(realpathSync(join(dir, "my-adapters.ts"))).href]);
    expect(reg.types()).toEqual(["compiled"]);
    const refused = await reg.loadModules(["../elsewhere.ts"], dir);
    expect(refused[0]?.message).toMatch(/refused/);
    expect(imported).toHaveLength(1);
  });

  it("loads user adapters from a package name", async () => {
    const reg = createAdapterRegistry([], {
      moduleAccess: { directories: [], packages: ["@factflow/adapters"] },
    });
    const source = `name: p\nadapter_modules: ["@factflow/adapters"]\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters: [{ type: passthrough }]\n`;
    await loadPipelineConfig(source, { path: join(import.meta.dirname, "pipeline.yaml"), registry: reg });
    expect(reg.types()).toContain("batch");
  });
});
