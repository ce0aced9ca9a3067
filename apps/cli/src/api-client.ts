import type { AppType } from "@factflow/server";
import { type EventSourceMessage, EventSourceParserStream } from "eventsource-parser/stream";
import { type ClientResponse, hc } from "hono/client";

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

/**
 * The origin Hono's typed client builds URLs on. Only path and query reach {@link FetchLike}, which
 * sends them to the real server (or the in-process app).
 */
const CLIENT_ORIGIN = "http://factflow.invalid";

function typedClient(send: FetchLike, headers: () => Record<string, string>) {
  return hc<AppType>(CLIENT_ORIGIN, {
    fetch: (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      return send(`${url.pathname}${url.search}`, init);
    },
    headers,
  });
}

/** Hono's typed client of the server's routes (`hc<AppType>`): request and answer types come from the routes. */
export type FactflowApi = ReturnType<typeof typedClient>;

/** The JSON of a typed-client answer: its success types (errors become {@link ApiError}). */
type JsonOf<R> =
  R extends ClientResponse<infer T, infer S, "json"> ? (S extends 200 | 201 | 202 ? T : never) : never;

/** A client of the Factflow HTTP API: typed calls through `api`, plus SSE following. */
export class ApiClient {
  /**
   * The routes of `@factflow/server`, typed from its `AppType`, e.g.
   * `client.call(client.api.api.v1.executions.$get({ query: { limit: "5" } }))`.
   */
  readonly api: FactflowApi;

  constructor(
    private readonly send: FetchLike,
    private readonly token?: string,
  ) {
    this.api = typedClient(send, () => this.headers());
  }

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

  /**
   * Awaits a typed-client call and returns its JSON answer; an error answer (or an unreachable
   * server) throws {@link ApiError} with the server's code and message.
   */
  async call<R extends ClientResponse<unknown, number, "json">>(request: Promise<R>): Promise<JsonOf<R>> {
    return (await this.answer(await request)) as JsonOf<R>;
  }

  /** The JSON of an untyped request (for paths built at run time). */
  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const init: RequestInit = {
      method,
      headers: this.headers(body === undefined ? {} : { "content-type": "application/json" }),
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    return (await this.answer(await this.send(path, init), `${method} ${path}`)) as T;
  }

  private async answer(
    response: Pick<Response, "ok" | "status" | "text" | "url">,
    what = `request to ${response.url || "the server"}`,
  ): Promise<unknown> {
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
        error?.message ?? `${what} answered ${response.status}`,
        error?.issues,
      );
    }
    return data;
  }

  get<T = unknown>(path: string): Promise<T> {
    return this.request<T>("GET", path);
  }

  post<T = unknown>(path: string, body: unknown = {}): Promise<T> {
    return this.request<T>("POST", path, body);
  }

  /** Asks the server to validate pipeline YAML (with the server's adapters and module access). */
  validateConfig(source: string) {
    return this.call(this.api.api.v1.configs.validate.$post({ json: { source } }));
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

/** Parses a `text/event-stream` body (eventsource-parser: the WHATWG rules, CRLF, comments, retry). */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const events = body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const event of events as unknown as AsyncIterable<EventSourceMessage>) {
    yield {
      ...(event.id === undefined ? {} : { id: event.id }),
      event: event.event ?? "message",
      data: event.data,
    };
  }
}
