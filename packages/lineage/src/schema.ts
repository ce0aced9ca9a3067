import type { ColumnType } from "kysely";

/** Timestamps are written as ISO strings or Dates and read back as Dates by both drivers. */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
/** JSON columns: objects go in already serialised (drivers differ on how they encode objects). */
type Json<T> = ColumnType<T, string, string>;

export interface PipelineConfigsTable {
  name: string;
  version: number;
  source: string;
  parsed: Json<unknown>;
  created_at: ColumnType<Date, Date | string | undefined, never>;
}

export interface PipelineExecutionsTable {
  id: string;
  config_name: string;
  config_version: number | null;
  status: string;
  config_snapshot: Json<unknown>;
  /** The input of an execution created before migration `0007_input_text`; null since. */
  input: Json<unknown> | null;
  /** The input as JSON text (null for none, or for an execution created before `0007_input_text`). */
  input_text: ColumnType<string | null, string | null | undefined, string | null>;
  error: string | null;
  parent_execution_id: string | null;
  replay_from_route: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  finished_at: Timestamp | null;
  counters: Json<Record<string, number>>;
  /** The process (its lease in `factflow_nodes`) that owns the running execution; null when none was recorded. */
  owner_node: ColumnType<string | null, string | null | undefined, string | null>;
}

/** One process running executions on this database and its lease (docs/deployment.md). */
export interface FactflowNodesTable {
  node_id: string;
  started_at: ColumnType<Date, Date | string | undefined, never>;
  heartbeat_at: Timestamp;
  lease_expires_at: Timestamp;
}

/** A named queue definition shared by the servers on this database (JSON of `QueueDefinition`). */
export interface FactflowQueueDefinitionsTable {
  name: string;
  definition: Json<unknown>;
  /** 1 when written first, one more at every change. */
  revision: number;
  updated_at: Timestamp;
}

export interface LineageTable {
  id: string;
  execution_id: string;
  kind: string;
  route: string;
  adapter: string | null;
  adapter_index: number | null;
  message_id: string;
  correlation_id: string;
  parent_id: string | null;
  attempt: number;
  status: string;
  input_hash: string | null;
  payload: Json<unknown> | null;
  output_keys: Json<string[]> | null;
  error: Json<unknown> | null;
  started_at: Timestamp;
  finished_at: Timestamp | null;
  /** Columns whose NUL characters were escaped to be stored (docs/lineage.md); null for most rows. */
  sanitised: Json<string[]> | null;
  /** Message rows: the message whose adapter row `parent_id` names; null on older rows. */
  parent_message_id: string | null;
  /** Message rows: settled adapter rows folded into this one (docs/lineage.md); null for most. */
  invocations: Json<unknown[]> | null;
}

/** The `lineage_rows` view: the table's rows and every folded adapter row as a row of its own. */
export type LineageRowsView = Omit<LineageTable, "parent_message_id" | "invocations">;

/** The kysely view of the database. */
export interface LineageDatabaseSchema {
  pipeline_configs: PipelineConfigsTable;
  pipeline_executions: PipelineExecutionsTable;
  lineage: LineageTable;
  lineage_rows: LineageRowsView;
  factflow_nodes: FactflowNodesTable;
  factflow_queue_definitions: FactflowQueueDefinitionsTable;
}
