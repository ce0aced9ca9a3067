/** The console's only way to the server: same-origin `fetch` with the token as a header, never in a URL. */

const TOKEN_KEY = "factflow.token";

export function readToken(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function saveToken(token: string | undefined): void {
  if (token === undefined || token === "") sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** An error answer of the API: its status, `error.code` and `error.message`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** Listeners told when the server answers 401, so the app can ask for a token. */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export function authHeaders(): Record<string, string> {
  const token = readToken();
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}

/** Calls `/api/v1<path>`; JSON in, JSON out. Throws ApiError with the server's message on 4xx/5xx. */
export async function api<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json", ...authHeaders() };
  const init: RequestInit = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`/api/v1${path}`, init);
  const text = await response.text();
  let json: unknown;
  try {
    json = text === "" ? null : JSON.parse(text);
  } catch {
    json = { error: { code: "bad_response", message: text.slice(0, 300) } };
  }
  if (!response.ok) {
    if (response.status === 401) for (const listener of unauthorizedListeners) listener();
    const error = (json as { error?: { code?: string; message?: string } } | null)?.error;
    // Some refusals (e.g. the mq-diagnostic's 503) still carry a full answer: keep it on the error.
    throw Object.assign(
      new ApiError(response.status, error?.code ?? "http_error", error?.message ?? `HTTP ${response.status}`),
      { body: json },
    );
  }
  return json as T;
}

/** Builds a query string from the defined, non-empty values. */
export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text === "" ? "" : `?${text}`;
}

export interface Page<T> {
  total: number;
  offset: number;
  limit: number;
  items: T[];
}

export type ExecutionStatus = "running" | "completed" | "failed" | "cancelled";

export interface Execution {
  id: string;
  status: ExecutionStatus;
  config_name: string;
  config_version: number | null;
  error: string | null;
  parent_execution_id: string | null;
  replay_from_route: string | null;
  created_at: string;
  finished_at: string | null;
  counters: Record<string, number>;
}

export interface ExecutionDetail extends Execution {
  input: unknown;
  input_bytes: number;
  input_omitted?: string;
  routes: Record<string, { messages: Record<string, number>; adapters: Record<string, number> }>;
  config_snapshot?: PipelineSnapshot;
}

export interface PipelineSnapshot {
  name: string;
  routes: Record<string, { inbound: { queue: string }; outbound?: string[]; adapters: { type: string }[] }>;
}

export interface LineageRow {
  id: string;
  kind: "message" | "adapter";
  route: string;
  adapter: string | null;
  message_id: string;
  correlation_id: string;
  parent_id: string | null;
  attempt: number;
  status: string;
  input_hash: string | null;
  /** The message body (message rows). */
  payload: unknown;
  error: { class: string; message: string; retryable?: boolean; fatal?: boolean; stack?: string } | null;
  output_keys: string[];
  started_at: string;
  finished_at: string | null;
}

export interface DeadLetter {
  message_id: string;
  correlation_id?: string;
  execution_id: string | null;
  reason: string;
  attempts: number;
  dead_lettered_at: string;
  last_error: string | null;
  headers: Record<string, unknown>;
  body: unknown;
}

export interface QueueStats {
  destination: string;
  depth: number;
  consumers: number;
  in_flight: number;
  dlq_depth: number;
}

export interface ConfigEntry {
  name: string;
  origin: string;
  version: number | null;
  routes: string[] | number;
}
