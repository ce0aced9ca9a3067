/**
 * How long a process's lease (a cluster node's, or any other's) lasts without a heartbeat; env
 * `FACTFLOW_CLUSTER_LEASE_MS` changes it.
 */
export const DEFAULT_LEASE_MS = 10_000;

/** The lease length env `FACTFLOW_CLUSTER_LEASE_MS` asks for (at least 1000), else the default. */
export function leaseMsOf(env: NodeJS.ProcessEnv): number {
  const lease = Number(env.FACTFLOW_CLUSTER_LEASE_MS);
  return Number.isInteger(lease) && lease >= 1000 ? lease : DEFAULT_LEASE_MS;
}
