import { ConfigError } from "@factflow/protocols";
import { type Context, Hono } from "hono";
import * as v from "valibot";
import { HttpProblem } from "../http-errors.js";
import { readJson, readQuery } from "../http-input.js";
import type { FactflowRuntime } from "../runtime.js";

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

/** Pipeline configs: the config directory plus uploaded versions. */
export function configRoutes(rt: FactflowRuntime): Hono {
  const app = new Hono();

  app.get("/configs", async (c) => c.json({ items: await rt.configs.list() }));

  app.post("/configs/validate", async (c) => {
    const source = await readSource(c);
    try {
      const config = await rt.configs.validate(source);
      return c.json({ valid: true, name: config.name, routes: Object.keys(config.routes), issues: [] });
    } catch (error) {
      // Problems in the YAML are the answer here, not a failed request.
      if (error instanceof ConfigError)
        return c.json({ valid: false, issues: error.issues, message: error.message });
      throw error;
    }
  });

  app.get("/configs/:name", async (c) => {
    const q = readQuery(c, GetQuery);
    const resolved = await rt.configs.resolve(c.req.param("name"), q.version);
    return c.json({
      name: resolved.name,
      version: resolved.version,
      source: resolved.source,
      config: resolved.config,
    });
  });

  app.post("/configs/:name/versions", async (c) => {
    const source = await readSource(c);
    const stored = await rt.configs.upload(c.req.param("name"), source);
    return c.json({ name: stored.name, version: stored.version }, 201, {
      Location: `/api/v1/configs/${stored.name}?version=${stored.version}`,
    });
  });

  return app;
}
