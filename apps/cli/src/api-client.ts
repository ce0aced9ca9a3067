/** Sends one request: global `fetch` to a server, or `app.request` of an in-process app. */
export type FetchLike = (path: string, init?: RequestInit) => Promise<Response>;

/** A failed API call, carrying the server's error code and message. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues?: readonly { path: string; message: string; line?: number }[],
  ) {
    super(message);
  }
}

/** One server-sent event. */
export interface SseEvent {
  readonly id?: string;
  readonly event: string;
  readonly data: string;
}

/** A small typed client of the Factflow HTTP API. */
export class ApiClient {
  constructor(
    private readonly send: FetchLike,
    private readonly token?: string,
  ) {}

  /** A client of a remote server at `baseUrl`. */
  static remote(baseUrl: string, token?: string): ApiClient {
    const base = baseUrl.replace(/\/+$/, "");
    return new ApiClient(async (path, init) => {
      try {
        return await fetch(`${base}${path}`, init);
      } catch (error) {
        const reason = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
        throw new ApiError(
          0,
          "unreachable",
          `cannot reach the Factflow server at ${base} (${reason}); start it with \`factflow serve\` or set --server / FACTFLOW_SERVER_URL`,
        );
      }
    }, token);
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.token === undefined ? extra : { ...extra, authorization: `Bearer ${this.token}` };
  }

  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = {
      method,
      headers: this.headers(body === undefined ? {} : { "content-type": "application/json" }),
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await this.send(path, init);
    const text = await response.text();
    let data: unknown;
    try {
      data = text === "" ? null : JSON.parse(text);
    } catch {
      data = text;
    }
    if (!response.ok) {
      const error = (
        data as { error?: { code?: string; message?: string; issues?: ApiError["issues"] } } | null
      )?.error;
      throw new ApiError(
        response.status,
        error?.code ?? `http_${response.status}`,
        error?.message ?? `${method} ${path} answered ${response.status}`,
        error?.issues,
      );
    }
    return data as T;
  }

  get<T = unknown>(path: string): Promise<T> {
    return this.request<T>("GET", path);
  }

  post<T = unknown>(path: string, body: unknown = {}): Promise<T> {
    return this.request<T>("POST", path, body);
  }

  /**
   * Follows an SSE stream until the server ends it, reconnecting (with Last-Event-ID) when the
   * connection drops. `onEvent` returning true stops following.
   */
  async followEvents(
    path: string,
    onEvent: (event: SseEvent) => boolean | undefined,
    options: { signal?: AbortSignal; retries?: number } = {},
  ) {
    let lastId: string | undefined;
    let failures = 0;
    const maxRetries = options.retries ?? 5;
    const aborted = () => options.signal?.aborted === true;
    while (!aborted()) {
      let response: Response;
      try {
        response = await this.send(path, {
          headers: this.headers(
            lastId === undefined
              ? { accept: "text/event-stream" }
              : { accept: "text/event-stream", "last-event-id": lastId },
          ),
          ...(options.signal === undefined ? {} : { signal: options.signal }),
        });
      } catch (error) {
        if (++failures > maxRetries) throw error;
        await new Promise((r) => setTimeout(r, 500 * failures));
        continue;
      }
      if (!response.ok) {
        const body = (await response.json().catch(() => null)) as {
          error?: { code?: string; message?: string };
        } | null;
        throw new ApiError(
          response.status,
          body?.error?.code ?? `http_${response.status}`,
          body?.error?.message ?? `GET ${path} answered ${response.status}`,
        );
      }
      if (response.status === 204 || response.body === null) return;
      try {
        for await (const event of parseSse(response.body)) {
          failures = 0;
          if (event.id !== undefined) lastId = event.id;
          if (onEvent(event) === true) return;
        }
        return; // The server ended the stream: the execution finished.
      } catch (error) {
        if (aborted()) return;
        if (++failures > maxRetries) throw error;
        await new Promise((r) => setTimeout(r, 500 * failures));
      }
    }
  }
}

/** Parses a `text/event-stream` body. */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event: { id?: string; event: string; data: string[] } = { event: "message", data: [] };
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline = buffer.indexOf("\n");
    while (newline >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      newline = buffer.indexOf("\n");
      if (line === "") {
        if (event.data.length > 0) {
          yield {
            ...(event.id === undefined ? {} : { id: event.id }),
            event: event.event,
            data: event.data.join("\n"),
          };
        }
        event = { event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") event.data.push(value);
      else if (field === "event") event.event = value;
      else if (field === "id") event.id = value;
    }
  }
}
