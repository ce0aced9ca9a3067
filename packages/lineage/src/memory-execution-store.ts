import type {
  ExecutionListQuery,
  ExecutionReadOptions,
  ExecutionRecord,
  ExecutionStatus,
  ExecutionStoreProtocol,
  NewExecution,
  PipelineConfig,
  StoredConfig,
} from "@factflow/protocols";
import { EXECUTION_STATUS_ORDER, FactflowError } from "@factflow/protocols";
import { checkListQuery } from "./execution-list-query.js";
import { assertUuid } from "./ids.js";

const EXECUTION_STATUSES = new Set(["running", "completed", "failed", "cancelled"]);

/**
 * `ExecutionStoreProtocol` held in memory, the companion of {@link MemoryLineageStore}: configs and
 * executions live as long as the process. `onDelete` is told which executions retention removed, so
 * their lineage goes with them.
 */
export class MemoryExecutionStore implements ExecutionStoreProtocol {
  readonly #configs = new Map<string, StoredConfig[]>();
  readonly #executions = new Map<string, ExecutionRecord>();
  readonly #onDelete: (ids: readonly string[]) => void;

  constructor(onDelete: (ids: readonly string[]) => void = () => {}) {
    this.#onDelete = onDelete;
  }

  async saveConfig(name: string, source: string, parsed: PipelineConfig): Promise<StoredConfig> {
    checkName(name);
    const versions = this.#configs.get(name) ?? [];
    const stored: StoredConfig = {
      name,
      version: versions.length + 1,
      source,
      parsed: structuredClone(parsed),
      createdAt: new Date().toISOString(),
    };
    versions.push(stored);
    this.#configs.set(name, versions);
    return stored;
  }

  async getConfig(name: string, version?: number): Promise<StoredConfig | undefined> {
    checkName(name);
    if (version !== undefined && (!Number.isInteger(version) || version < 1)) {
      throw new FactflowError(
        "invalid_argument",
        `[factflow/lineage] config version ${version} must be an integer ≥ 1.`,
      );
    }
    const versions = this.#configs.get(name);
    if (versions === undefined) return undefined;
    return version === undefined ? versions[versions.length - 1] : versions[version - 1];
  }

  async listConfigs(): Promise<readonly StoredConfig[]> {
    return [...this.#configs.keys()].sort().map((name) => {
      const versions = this.#configs.get(name) as StoredConfig[];
      return versions[versions.length - 1] as StoredConfig;
    });
  }

  async createExecution(execution: NewExecution): Promise<ExecutionRecord> {
    assertUuid(execution.id, "execution id");
    if (execution.parentExecutionId !== undefined)
      assertUuid(execution.parentExecutionId, "parent execution id");
    if (this.#executions.has(execution.id)) {
      throw new FactflowError(
        "invalid_argument",
        `[factflow/lineage] execution ${execution.id} already exists; executions need a fresh id.`,
      );
    }
    const record: ExecutionRecord = {
      id: execution.id,
      configName: execution.configName,
      configVersion: execution.configVersion,
      status: "running",
      configSnapshot: structuredClone(execution.configSnapshot),
      input: execution.input === null ? null : structuredClone(execution.input),
      error: null,
      parentExecutionId: execution.parentExecutionId ?? null,
      replayFromRoute: execution.replayFromRoute ?? null,
      createdAt: new Date().toISOString(),
      finishedAt: null,
      counters: {},
    };
    this.#executions.set(record.id, record);
    return record;
  }

  async getExecution(id: string, options: ExecutionReadOptions = {}): Promise<ExecutionRecord | undefined> {
    assertUuid(id, "execution id");
    const record = this.#executions.get(id);
    return record === undefined || options.includeInput !== false ? record : { ...record, input: null };
  }

  async listExecutions(query: ExecutionListQuery = {}) {
    const q = checkListQuery(query);
    const from = q.from?.getTime();
    const to = q.to?.getTime();
    const now = Date.now();
    const key = (e: ExecutionRecord): number => {
      if (q.sort === "duration")
        return (e.finishedAt === null ? now : Date.parse(e.finishedAt)) - Date.parse(e.createdAt);
      if (q.sort === "status") return EXECUTION_STATUS_ORDER.indexOf(e.status);
      return 0;
    };
    // By start, newest first; UUIDv7 ids break ties in creation order.
    const newest = (a: ExecutionRecord, b: ExecutionRecord) =>
      a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1;
    const sign = q.descending ? -1 : 1;
    const matching = [...this.#executions.values()]
      .filter(
        (e) =>
          (query.status === undefined || e.status === query.status) &&
          (query.configName === undefined || e.configName === query.configName) &&
          (query.parentExecutionId === undefined || e.parentExecutionId === query.parentExecutionId) &&
          (from === undefined || Date.parse(e.createdAt) >= from) &&
          (to === undefined || Date.parse(e.createdAt) < to),
      )
      .sort((a, b) =>
        q.sort === "started" ? -sign * newest(a, b) : sign * (key(a) - key(b)) || newest(a, b),
      );
    const page = matching.slice(q.offset, q.offset + q.limit);
    return {
      total: matching.length,
      items: query.includeInput === false ? page.map((e) => ({ ...e, input: null })) : page,
    };
  }

  async finishExecution(
    id: string,
    status: Exclude<ExecutionStatus, "running">,
    details: { error?: string; counters?: Record<string, number> } = {},
  ): Promise<boolean> {
    assertUuid(id, "execution id");
    if (status === ("running" as string) || !EXECUTION_STATUSES.has(status)) {
      throw new FactflowError(
        "invalid_argument",
        `[factflow/lineage] an execution cannot finish as ${JSON.stringify(status)} (completed | failed | cancelled).`,
      );
    }
    const record = this.#executions.get(id);
    if (record === undefined || record.status !== "running") return false;
    this.#executions.set(id, {
      ...record,
      status,
      finishedAt: new Date().toISOString(),
      ...(details.error === undefined ? {} : { error: details.error }),
      ...(details.counters === undefined ? {} : { counters: { ...details.counters } }),
    });
    return true;
  }

  async deleteExecutionsBefore(before: Date): Promise<number> {
    if (!(before instanceof Date) || Number.isNaN(before.getTime())) {
      throw new FactflowError(
        "invalid_argument",
        "[factflow/lineage] deleteExecutionsBefore needs a valid Date.",
      );
    }
    const doomed: string[] = [];
    for (const e of this.#executions.values())
      if (e.finishedAt !== null && new Date(e.finishedAt) < before) doomed.push(e.id);
    for (const id of doomed) this.#executions.delete(id);
    this.#onDelete(doomed);
    return doomed.length;
  }

  async close(): Promise<void> {}
}

function checkName(name: string): void {
  if (typeof name !== "string" || name.length === 0 || name.length > 120) {
    throw new FactflowError(
      "invalid_argument",
      "[factflow/lineage] config name must be a non-empty string of at most 120 characters.",
    );
  }
}
