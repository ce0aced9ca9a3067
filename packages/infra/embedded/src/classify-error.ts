import { ProviderError, type ProviderErrorReason } from "@factflow/protocols";
import { PROVIDER_NAME } from "./errors.js";

/**
 * Turns a file-system error of the log into a `ProviderError`. The embedded broker's only native
 * failures are the disk's: permissions, a full disk, a missing directory, another process holding it.
 */
export function classifyError(error: unknown, action: string): ProviderError {
  if (error instanceof ProviderError) return error;
  const code =
    typeof (error as { code?: unknown })?.code === "string" ? (error as { code: string }).code : "";
  let reason: ProviderErrorReason = "unknown";
  let hint = "check the data directory and the disk";
  let retryable = false;
  switch (code) {
    case "EACCES":
    case "EPERM":
    case "EROFS":
      reason = "authorization";
      hint = "the process may not write the data directory: fix its permissions or choose another dataDir";
      break;
    case "ENOSPC":
    case "EDQUOT":
      reason = "rejected";
      hint = "the disk is full: free space, then retry";
      break;
    case "ENOENT":
    case "ENOTDIR":
      reason = "not-found";
      hint = "a path component of dataDir is missing or not a directory";
      break;
    case "EMFILE":
    case "ENFILE":
    case "EBUSY":
    case "EAGAIN":
      reason = "unknown";
      retryable = true;
      hint = "the system is out of file handles or the file is busy: retry later";
      break;
    default:
      break;
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new ProviderError(
    PROVIDER_NAME,
    reason,
    `${action} failed (${code || "error"}: ${detail}): ${hint}`,
    {
      cause: error,
      retryable,
    },
  );
}
