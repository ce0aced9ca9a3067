import { api } from "./api.ts";
import { useLoad } from "./components/common.tsx";

/** What `GET /api/v1/system/info` says about this server, as far as the console uses it. */
export interface SystemInfo {
  provider: string;
  executions_running: number;
  /** Executions this server runs; a `running` one missing here was left behind by a stopped server. */
  executions_running_here?: string[];
  settings: { api_token?: string; api_token_reads?: boolean; max_concurrent?: number };
}

/** The server's system info, re-read every `pollMs` (or once). */
export function useSystemInfo(pollMs?: number) {
  return useLoad(() => api<SystemInfo>("GET", "/system/info"), [], pollMs);
}

/**
 * Whether "resume" can do anything for a running execution: only when the server does not run it
 * (it was left running by a stopped server). Unknown while the info is loading: not offered.
 */
export function canResume(info: SystemInfo | undefined, id: string, status: string): boolean {
  if (status !== "running" || info?.executions_running_here === undefined) return false;
  return !info.executions_running_here.includes(id);
}
