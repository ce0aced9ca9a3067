type Method = "GET" | "POST" | "PUT";

/** A JSON call to a factflow server; throws with the answer on a non-2xx status. */
// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON shapes.
export async function api(base: string, method: Method, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${base}${path}`, {
    method,
    signal: AbortSignal.timeout(30_000),
    ...(body === undefined
      ? {}
      : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 500)}`);
  return text === "" ? undefined : JSON.parse(text);
}
