import { findJsonHazard, schemaIssueText } from "@factflow/protocols";
import type { Context } from "hono";
import * as v from "valibot";
import { HttpProblem } from "./http-errors.js";

function issuesOf(issues: readonly v.BaseIssue<unknown>[]): { path: string; message: string }[] {
  return issues.map((issue) => ({
    path: v.getDotPath(issue) ?? "(body)",
    message: schemaIssueText(issue, "see docs/http-api.md for the accepted fields"),
  }));
}

/** Reads a JSON body and validates it; bad JSON and schema problems become 400s. */
export async function readJson<TSchema extends v.GenericSchema>(
  c: Context,
  schema: TSchema,
): Promise<v.InferOutput<TSchema>> {
  const text = await c.req.text();
  let data: unknown;
  try {
    data = text.trim() === "" ? {} : JSON.parse(text);
  } catch (error) {
    throw new HttpProblem(
      400,
      "bad_json",
      `request body is not valid JSON (${(error as Error).message}); send a JSON object`,
    );
  }
  const hazard = findJsonHazard(data);
  if (hazard !== undefined) {
    const path = hazard.path === "$" ? "(body)" : hazard.path.slice(2);
    throw new HttpProblem(400, "invalid_request", `request body is invalid: ${path} ${hazard.message}`, [
      { path, message: hazard.message },
    ]);
  }
  return validate(schema, data, "request body");
}

/** Validates query parameters. */
export function readQuery<TSchema extends v.GenericSchema>(
  c: Context,
  schema: TSchema,
): v.InferOutput<TSchema> {
  return validate(schema, c.req.query(), "query");
}

function validate<TSchema extends v.GenericSchema>(
  schema: TSchema,
  data: unknown,
  what: string,
): v.InferOutput<TSchema> {
  const result = v.safeParse(schema, data);
  if (!result.success) {
    const issues = issuesOf(result.issues);
    const summary = issues.map((i) => `${i.path}: ${i.message}`).join("; ");
    throw new HttpProblem(400, "invalid_request", `${what} is invalid: ${summary}`, issues);
  }
  return result.output;
}

/** An integer query parameter with bounds and a default. */
export const queryInt = (fallback: number, min: number, max: number) =>
  v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\d+$/, "must be a non-negative whole number"),
      v.transform(Number),
      v.minValue(min, `must be at least ${min}`),
      v.maxValue(max, `must be at most ${max}`),
    ),
    String(fallback),
  );

/** offset/limit paging, limit ≤ 500. */
export const PagingQuery = {
  offset: queryInt(0, 0, Number.MAX_SAFE_INTEGER),
  limit: queryInt(50, 1, 500),
};
