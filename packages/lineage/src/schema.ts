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
  input: Json<unknown> | null;
  error: string | null;
  parent_execution_id: string | null;
  replay_from_route: string | null;
  created_at: ColumnType<Date, Date | string | undefined, never>;
  finished_at: Timestamp | null;
  counters: Json<Record<string, number>>;
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
}

/** The kysely view of the database. */
export interface LineageDatabaseSchema {
  pipeline_configs: PipelineConfigsTable;
  pipeline_executions: PipelineExecutionsTable;
  lineage: LineageTable;
}
