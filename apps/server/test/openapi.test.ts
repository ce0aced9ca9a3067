import { describe, expect, it } from "vitest";
import { OPERATIONS, openApiDocument } from "../src/openapi.js";

type Doc = { paths: Record<string, Record<string, Record<string, unknown>>> };
const doc = openApiDocument() as unknown as Doc;
// biome-ignore lint/suspicious/noExplicitAny: a JSON document, read by literal paths below.
const op = (method: string, path: string) => doc.paths[path]?.[method] as Record<string, any>;

describe("the generated OpenAPI document", () => {
  it("carries the enums and bounds of the query schemas", () => {
    const status = op("get", "/api/v1/executions").parameters.find(
      (p: { name: string }) => p.name === "status",
    );
    expect(status.schema.enum).toEqual(["running", "completed", "failed", "cancelled"]);
    const listParam = (name: string) =>
      op("get", "/api/v1/executions").parameters.find((p: { name: string }) => p.name === name);
    expect(listParam("sort").schema.enum).toEqual(["started", "duration", "status"]);
    expect(listParam("order").schema.enum).toEqual(["asc", "desc"]);
    expect(listParam("from").schema).toMatchObject({ type: "string", format: "date-time" });
    expect(listParam("to").required).toBe(false);
    const kind = op("get", "/api/v1/executions/{id}/lineage").parameters.find(
      (p: { name: string }) => p.name === "kind",
    );
    expect(kind.schema.enum).toEqual(["message", "adapter"]);
    const destination = op("get", "/api/v1/queues/dlq").parameters.find(
      (p: { name: string }) => p.name === "destination",
    );
    expect(destination.required).toBe(true);
  });

  it("carries the body shapes the routes validate", () => {
    const replay = op("post", "/api/v1/executions/{id}/replay").requestBody.content["application/json"]
      .schema;
    expect(replay).toMatchObject({
      type: "object",
      required: ["from_route"],
      additionalProperties: false,
      properties: { message_ids: { type: "array", items: { type: "string" }, minItems: 1 } },
    });
    const create = op("post", "/api/v1/executions").requestBody.content["application/json"].schema;
    expect(create.properties.version).toMatchObject({ type: "integer", minimum: 1 });
    const definition = op("put", "/api/v1/queues/{name}/definition").requestBody.content["application/json"];
    expect(definition.schema.properties.ordering.enum).toEqual(["none", "fifo"]);
    expect(Object.keys(op("post", "/api/v1/configs/validate").requestBody.content)).toEqual([
      "application/json",
      "application/yaml",
    ]);
  });

  it("lists each operation once, with the body schema the fuzz tests read", () => {
    const keys = OPERATIONS.map((o) => `${o.method} ${o.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    const retention = OPERATIONS.find((o) => o.path === "/api/v1/system/retention");
    expect(Object.keys((retention?.body?.properties ?? {}) as object)).toEqual(["older_than_days"]);
  });
});
