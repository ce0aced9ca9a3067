/**
 * Returns `url` with its password replaced by `<redacted>`, safe to print in errors and logs.
 * Unparseable input is not echoed at all, since it may still hold a secret.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "__REDACTED__";
    return parsed.toString().replace("__REDACTED__", "<redacted>");
  } catch {
    return "<unparseable database URL>";
  }
}
