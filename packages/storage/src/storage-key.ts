import { FactflowError } from "@factflow/protocols";

/** Directory under the root that holds the sidecars; no key may start with it. */
export const SIDECAR_DIR = ".sidecars";
/** Prefix of in-progress temp files; no key segment may start with it. */
export const TEMP_PREFIX = ".~tmp-";
const MAX_KEY_LENGTH = 1024;

/** Why a key is refused, or undefined when it is acceptable. */
export function keyProblem(key: unknown): string | undefined {
  if (typeof key !== "string") return "it is not a string";
  if (key.length === 0) return "it is empty";
  if (key.length > MAX_KEY_LENGTH) return `it is longer than ${MAX_KEY_LENGTH} characters`;
  if (key.includes("\0")) return "it contains a NUL character";
  if (key.includes("\\")) return 'it contains a backslash (use "/" between segments)';
  if (key.startsWith("/")) return "it is an absolute path";
  if (/^[A-Za-z]:/.test(key)) return "it starts with a drive letter";
  // Encoded separators and NUL would turn into real ones in any layer that decodes keys (URLs, CLIs).
  if (/%(2f|5c|00)/i.test(key)) return "it contains an encoded slash, backslash or NUL (%2F, %5C, %00)";
  const segments = key.split("/");
  for (const segment of segments) {
    if (segment === "") return "it has an empty segment (leading, trailing or doubled /)";
    if (segment === "." || segment === "..") return `it has a "${segment}" segment`;
    if (/^(%2e|\.)(%2e|\.)?$/i.test(segment)) return "it has an encoded . or .. segment";
    if (segment.startsWith(TEMP_PREFIX))
      return `segments may not start with "${TEMP_PREFIX}" (reserved for temp files)`;
  }
  if (segments[0] === SIDECAR_DIR) return `"${SIDECAR_DIR}/" is reserved for sidecars`;
  return undefined;
}

/**
 * Checks an artefact key.
 * @throws FactflowError `storage_key_invalid`, saying why and what a valid key looks like.
 */
export function assertValidKey(key: unknown): asserts key is string {
  const problem = keyProblem(key);
  if (problem === undefined) return;
  const shown = typeof key === "string" ? JSON.stringify(key.slice(0, 200)) : String(key);
  throw new FactflowError(
    "storage_key_invalid",
    `[factflow/storage] artefact key ${shown} is invalid: ${problem}. ` +
      'Use a relative path of non-empty "/"-separated segments, e.g. "<execution>/<route>/output.json".',
  );
}
