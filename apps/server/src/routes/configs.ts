import { ConfigError, type ConfigIssue } from "@factflow/protocols";
import type { FactflowRuntime } from "@factflow/runtime";
import { type Context, Hono } from "hono";
import * as v from "valibot";
import { HttpProblem } from "../http-errors.js";
import { readJson, readQuery } from "../http-input.js";
import type { RouteDoc } from "./route-doc.js";
import { jsonBody, queryParams } from "./typed-input.js";

const SourceBody = v.strictObject({
  source: v.pipe(v.string(), v.minLength(1, "must hold the pipeline YAML")),
});
const GetQuery = v.object({
  version: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d{1,9}$/, "must be a version number (1 to 999999999)"),
      v.transform(Number),
    ),
  ),
});

/** The YAML of a request: a raw YAML body (`application/yaml`), or JSON `{ "source": "..." }`. */
async function readSource(c: Context): Promise<string> {
  const type = c.req.header("content-type") ?? "";
  if (/yaml/.test(type)) {
    const text = await c.req.text();
    if (text.trim() === "")
      throw new HttpProblem(400, "invalid_request", "request body is empty; send the pipeline YAML");
    return text;
  }
  return (await readJson(c, SourceBody)).source;
}

/** The routes below, for the OpenAPI document. */
export const CONFIG_ROUTES: readonly RouteDoc[] = [
  {
    method: "get",
    path: "/configs",
    summary: "List configs (config directory + uploaded versions)",
    tag: "configs",
  },
  {
    method: "post",
    path: "/configs/validate",
    summary: "Validate pipeline YAML; every issue with its YAML path",
    tag: "configs",
    body: SourceBody,
    yaml: true,
  },
  {
    method: "get",
    path: "/configs/{name}",
    summary: "Get a config (latest, or ?version=N)",
    tag: "configs",
    query: GetQuery,
  },
  {
    method: "post",
    path: "/configs/{name}/versions",
    summary: "Upload a new version (YAML body or {source})",
    tag: "configs",
    body: SourceBody,
    yaml: true,
    ok: 201,
  },
];

/**
 * Pipeline configs: the config directory plus uploaded versions. One chain, returned as built, so
 * its types reach `AppType` (Hono's typed client).
 */
export function configRoutes(rt: FactflowRuntime) {
  return new Hono()
    .get("/configs", async (c) => c.json({ items: await rt.configs.list() }))
    .post("/configs/validate", jsonBody(SourceBody), async (c) => {
      const source = await readSource(c);
      try {
        const config = await rt.configs.validate(source);
        return c.json({
          valid: true as const,
          name: config.name,
          routes: Object.keys(config.routes),
          issues: [] as ConfigIssue[],
        });
      } catch (error) {
        // Problems in the YAML are the answer here, not a failed request.
        if (error instanceof ConfigError)
          return c.json({
            valid: false as const,
            issues: error.issues as ConfigIssue[],
            message: error.message,
          });
        throw error;
      }
    })
    .get("/configs/:name", queryParams(GetQuery), async (c) => {
      const q = readQuery(c, GetQuery);
      const resolved = await rt.configs.resolve(c.req.param("name"), q.version);
      return c.json({
        name: resolved.name,
        version: resolved.version,
        source: resolved.source,
        config: resolved.config,
      });
    })
    .post("/configs/:name/versions", jsonBody(SourceBody), async (c) => {
      const source = await readSource(c);
      const stored = await rt.configs.upload(c.req.param("name"), source);
      return c.json({ name: stored.name, version: stored.version }, 201, {
        Location: `/api/v1/configs/${stored.name}?version=${stored.version}`,
      });
    });
}
