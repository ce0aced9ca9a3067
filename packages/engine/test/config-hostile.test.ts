import { mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adapters } from "@factflow/adapters";
import { ConfigError, type ConfigIssue } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createAdapterRegistry, loadPipelineConfig, type ModuleAccess } from "../src/index.js";

async function issuesOf(source: string, options: Parameters<typeof loadPipelineConfig>[1] = {}) {
  try {
    await loadPipelineConfig(source, { registry: createAdapterRegistry(adapters), ...options });
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).issues;
  }
  throw new Error("expected a ConfigError");
}

const pipeline = (extra = "", adapterConfig = "{}") =>
  `name: p\n${extra}init: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters: [{ type: passthrough, config: ${adapterConfig} }]\n`;

/** n routes r0 → r1 → ... ; `cycle` closes the chain back to r0 (a cycle with no way out). */
function manyRoutes(n: number, cycle: boolean): string {
  const lines = ["name: big", "init: { route: r0 }", "routes:"];
  for (let i = 0; i < n; i++) {
    const next = i + 1 < n ? `[q${i + 1}]` : cycle ? "[q0]" : "[]";
    lines.push(
      `  r${i}:`,
      `    inbound: { queue: q${i} }`,
      `    outbound: ${next}`,
      "    adapters: [{ type: passthrough }]",
    );
  }
  return `${lines.join("\n")}\n`;
}

describe("hostile configs get a clear ConfigError", () => {
  it("refuses NUL characters and lone surrogates, naming the path", async () => {
    const nul = await issuesOf(pipeline("", '{ x: "a\\0b" }'));
    expect(nul[0]).toMatchObject({ path: "routes.a.adapters[0].config.x" });
    expect(nul[0]?.message).toMatch(/NUL/);
    const surrogate = await issuesOf(pipeline("", '{ x: "a\\ud800b" }'));
    expect(surrogate[0]?.message).toMatch(/surrogate/);
    const rawNul = await issuesOf(`name: p\u0000\n`);
    expect(rawNul[0]?.message).toMatch(/YAML syntax|NUL/);
  });

  it("refuses nesting beyond the depth limit, flow or block, without overflowing the stack", async () => {
    const flow = await issuesOf(pipeline("", `${"[".repeat(10_000)}${"]".repeat(10_000)}`));
    expect(flow[0]?.message).toMatch(/nested/);
    const block = await issuesOf(pipeline("", `{ x: ${"[".repeat(59)}1${"]".repeat(59)} }`));
    expect(block[0]?.message).toMatch(/more than 64 levels/);
    expect(block[0]?.path).toMatch(/^routes\.a\.adapters\[0\]\.config\.x/);
  });

  it("refuses block nesting and deep nesting at the end of a large source the same way", async () => {
    const blockSeq = await issuesOf(`name: p\nx:\n  ${"- ".repeat(10_000)}1\n`);
    expect(blockSeq[0]).toMatchObject({ path: "$", line: 3 });
    expect(blockSeq[0]?.message).toMatch(/nested more than 64 levels/);
    const indented = Array.from({ length: 100 }, (_, i) => `${" ".repeat(i)}k:`).join("\n");
    const blockMap = await issuesOf(`name: p\n${indented} 1\n`);
    expect(blockMap[0]?.message).toMatch(/nested more than 64 levels/);
    const late = `${"# padding\n".repeat(50_000)}x: ${"[".repeat(100_000)}${"]".repeat(100_000)}\n`;
    const lateIssues = await issuesOf(late, { maxBytes: 2_000_000 });
    expect(lateIssues[0]).toMatchObject({ path: "$", line: 50_001 });
  });

  it("refuses custom and YAML 1.1 tags, duplicate keys, unknown aliases and several documents, with their line", async () => {
    for (const value of ["!foo 1", "!!binary aGk=", "!!timestamp 2020-01-01", '!!js/function "f() {}"']) {
      const issues = await issuesOf(pipeline("", `{ x: ${value} }`));
      expect(issues[0], value).toMatchObject({ path: "$", line: 6 });
      expect(issues[0]?.message, value).toMatch(/YAML syntax: Unresolved tag: .*no custom tags/);
    }
    const duplicate = await issuesOf(`name: p\ninit: { route: a }\nname: q\n`);
    expect(duplicate[0]).toMatchObject({
      path: "$",
      line: 3,
      message: 'YAML syntax: duplicated mapping key "name"',
    });
    const alias = await issuesOf(pipeline("", "{ x: *nowhere }"));
    expect(alias[0]).toMatchObject({ line: 6, message: 'YAML syntax: unidentified alias "nowhere"' });
    const aliasKey = await issuesOf(`name: p\nx: &k [a]\ny: { *k : 1 }\n`);
    expect(aliasKey[0]).toMatchObject({
      line: 3,
      message: expect.stringMatching(/map key must be a plain value/),
    });
    const aliasDuplicate = await issuesOf(`name: &n p\n*n : 1\np: 2\n`);
    expect(aliasDuplicate[0]).toMatchObject({ line: 3, message: 'YAML syntax: duplicated mapping key "p"' });
    const complexKey = await issuesOf(`name: p\n? [a, b]\n: 1\n`);
    expect(complexKey[0]).toMatchObject({
      line: 2,
      message: expect.stringMatching(/map key must be a plain value/),
    });
    const twoDocuments = await issuesOf(`${pipeline()}---\nname: q\n`);
    expect(twoDocuments[0]).toMatchObject({ line: 7, message: expect.stringMatching(/single document/) });
  });

  it("gives every issue its line, however large the source", async () => {
    const issues = await issuesOf(
      manyRoutes(2000, false).replace(
        "r1999:\n    inbound: { queue: q1999 }",
        "r1999:\n    inbound: { queue: q1999, concurency: 2 }",
      ),
      {
        maxRoutes: 2000,
      },
    );
    expect(issues).toEqual([
      expect.objectContaining({ path: "routes.r1999.inbound.concurency", line: 3 + 1999 * 4 + 2 }),
    ]);
  });

  it("refuses more routes than the limit with a clear message", async () => {
    const issues = await issuesOf(manyRoutes(1001, false));
    expect(issues).toEqual([
      expect.objectContaining({
        path: "routes",
        message: expect.stringMatching(/1001 routes, over the limit of 1000/),
      }),
    ]);
  });

  it("validates a 10,000-route chain and reports a 10,000-route cycle as an issue (raised limit)", async () => {
    const chain = await loadPipelineConfig(manyRoutes(10_000, false), {
      registry: createAdapterRegistry(adapters),
      maxRoutes: 10_000,
    });
    expect(Object.keys(chain.routes)).toHaveLength(10_000);
    const issues = await issuesOf(manyRoutes(10_000, true), { maxRoutes: 10_000 });
    expect(issues).toHaveLength(1);
    expect(issues[0]?.message).toMatch(/form a cycle with no way out/);
  });

  it("refuses every adapter module outside the allowlist without importing it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-access-"));
    const outside = mkdtempSync(join(tmpdir(), "factflow-outside-"));
    const marker = `factflow_pwned_${process.pid}`;
    const evil = `globalThis.${marker} = true; export const adapters = [];`;
    writeFileSync(join(outside, "evil.mjs"), evil);
    symlinkSync(join(outside, "evil.mjs"), join(dir, "link.mjs"));
    writeFileSync(join(dir, "ok.mjs"), "export const adapters = [];");
    const access: ModuleAccess = {
      directories: [dir],
      packages: ["@factflow/adapters"],
      hint: "set FACTFLOW_ADAPTER_DIRS",
    };
    const refused = [
      `data:text/javascript,${encodeURIComponent(evil)}`,
      "node:child_process",
      "http://127.0.0.1:1/evil.mjs",
      `file://${join(outside, "evil.mjs")}`,
      join(outside, "evil.mjs"),
      `../${outside.split("/").pop()}/evil.mjs`,
      "./link.mjs",
      "left-pad",
    ];
    for (const module of refused) {
      const issues = await issuesOf(pipeline(`adapter_modules: [${JSON.stringify(module)}]\n`), {
        path: join(dir, "pipeline.yaml"),
        registry: createAdapterRegistry(adapters, { moduleAccess: access }),
      });
      expect(issues[0]?.path, module).toBe("adapter_modules[0]");
      expect(issues[0]?.message, module).toMatch(/is refused: .*set FACTFLOW_ADAPTER_DIRS/);
    }
    expect((globalThis as Record<string, unknown>)[marker]).toBeUndefined();
    const ok = await loadPipelineConfig(pipeline("adapter_modules: [./ok.mjs, '@factflow/adapters']\n"), {
      path: join(dir, "pipeline.yaml"),
      registry: createAdapterRegistry(adapters, { moduleAccess: access }),
    });
    expect(ok.adapter_modules).toEqual([join(dir, "ok.mjs"), "@factflow/adapters"]);
  });

  it("never imports anything with the default (empty) access", async () => {
    const issues: readonly ConfigIssue[] = await issuesOf(
      pipeline('adapter_modules: ["@factflow/adapters"]\n'),
    );
    expect(issues[0]?.message).toMatch(/not in the allowed packages/);
  });
});
