import { ConfigError, type ConfigIssue, redactSecrets } from "@factflow/protocols";
import * as v from "valibot";

/**
 * Validates a provider's config against `schema` (an absent config means `{}`). On failure it throws
 * one `ConfigError` listing every issue by path, with the password of the config's `url` and every
 * string in `secrets` removed from the messages: a broker's credentials never reach a log through a
 * bad setting. Every provider parses its config through this, so they all report alike.
 */
export function parseProviderConfig<TSchema extends v.GenericSchema>(
  provider: string,
  schema: TSchema,
  input: unknown,
  secrets: readonly string[] = [],
): v.InferOutput<TSchema> {
  const result = v.safeParse(schema, input ?? {});
  if (result.success) return result.output;
  const url =
    typeof input === "object" && input !== null && typeof (input as { url?: unknown }).url === "string"
      ? (input as { url: string }).url
      : undefined;
  const issues: ConfigIssue[] = result.issues.map((issue) => {
    const path = issue.path?.map((p) => String(p.key)).join(".") ?? "";
    let message = url === undefined ? issue.message : redactSecrets(issue.message, url);
    for (const secret of secrets) if (secret.length > 0) message = message.split(secret).join("<redacted>");
    return { path: path === "" ? "(root)" : path, message };
  });
  throw new ConfigError(`[factflow/${provider}] provider config`, issues);
}
