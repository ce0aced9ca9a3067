import type { MiddlewareHandler } from "hono";
import type * as v from "valibot";

type Declares<Target extends "json" | "query", S extends v.GenericSchema> = MiddlewareHandler<
  // biome-ignore lint/suspicious/noExplicitAny: any env, like Hono's own validator.
  any,
  string,
  { in: { [K in Target]: v.InferInput<S> }; out: { [K in Target]: v.InferOutput<S> } }
>;

const pass: MiddlewareHandler = async (_c, next) => {
  await next();
};

/**
 * Declares a route's JSON body as `schema`'s input type, so Hono's typed client (`hc<AppType>`)
 * checks what callers send. It validates nothing: the handler still validates with `readJson`, so
 * the order of checks (an unknown id answers 404 before a bad body answers 400) is unchanged.
 */
export function jsonBody<S extends v.GenericSchema>(_schema: S): Declares<"json", S> {
  return pass;
}

/** Declares a route's query parameters as `schema`'s input type (see {@link jsonBody}). */
export function queryParams<S extends v.GenericSchema>(_schema: S): Declares<"query", S> {
  return pass;
}
