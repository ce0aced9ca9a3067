import {
  type Adapter,
  type AdapterDefinition,
  type AdapterFactoryContext,
  ConfigError,
  type JsonObject,
  type JsonValue,
} from "@factflow/protocols";
import * as v from "valibot";

type AnySchema = v.GenericSchema<unknown, unknown>;

/**
 * Builds an `AdapterDefinition` whose `config` block is validated by a valibot schema: once when the
 * pipeline config is loaded (`validateConfig`) and again when an instance is created.
 */
export function defineAdapter<TSchema extends AnySchema>(spec: {
  type: string;
  description: string;
  schema: TSchema;
  mayEndChain?: boolean;
  /** See `AdapterDefinition.holdsMessagesMs`; called with the parsed config. */
  holdsMessagesMs?(config: v.InferOutput<TSchema>): number;
  build(config: v.InferOutput<TSchema>, context: AdapterFactoryContext): Adapter;
}): AdapterDefinition {
  const issuesOf = (config: JsonObject): string[] => {
    const result = v.safeParse(spec.schema, config);
    if (result.success) return [];
    return result.issues.map((issue) => {
      const path = (issue.path ?? []).map((p) => String(p.key)).join(".");
      return `${spec.type}: ${path === "" ? "" : `${path}: `}${issue.message}`;
    });
  };
  return {
    type: spec.type,
    description: spec.description,
    ...(spec.mayEndChain === undefined ? {} : { mayEndChain: spec.mayEndChain }),
    ...(spec.holdsMessagesMs === undefined
      ? {}
      : {
          holdsMessagesMs: (config: JsonObject) => {
            const result = v.safeParse(spec.schema, config);
            return result.success ? (spec.holdsMessagesMs?.(result.output) ?? 0) : 0;
          },
        }),
    validateConfig: issuesOf,
    create(config, context) {
      const result = v.safeParse(spec.schema, config);
      if (!result.success) {
        throw new ConfigError(
          `[factflow/adapters] adapter "${spec.type}" on route "${context.route}"`,
          issuesOf(config).map((message) => ({
            path: `routes.${context.route}.adapters.${spec.type}.config`,
            message,
          })),
        );
      }
      return spec.build(Object.freeze(result.output) as v.InferOutput<TSchema>, context);
    },
  };
}

/** Reads a dotted path (`a.b.0.c`) from a JSON value; `undefined` when absent. */
export function getPath(value: JsonValue, path: string): JsonValue | undefined {
  if (path === "" || path === "$") return value;
  let current: JsonValue | undefined = value;
  for (const segment of path.split(".")) {
    if (current === null || typeof current !== "object") return undefined;
    current = Array.isArray(current) ? current[Number(segment)] : current[segment];
  }
  return current;
}

/** Any JSON value, for config fields. */
export const JsonSchema = v.custom<JsonValue>(() => true);

/** A dotted field path. */
export const FieldPathSchema = v.pipe(v.string(), v.minLength(1), v.maxLength(200));
