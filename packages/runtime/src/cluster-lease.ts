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

/**
 * How often a cluster server runs discovery when no notification woke it sooner; env
 * `FACTFLOW_CLUSTER_DISCOVERY_MS` changes it.
 */
export const DEFAULT_DISCOVERY_MS = 5000;

/** The discovery interval env `FACTFLOW_CLUSTER_DISCOVERY_MS` asks for (at least 1000), else the default. */
export function discoveryMsOf(env: NodeJS.ProcessEnv): number {
  const interval = Number(env.FACTFLOW_CLUSTER_DISCOVERY_MS);
  return Number.isInteger(interval) && interval >= 1000 ? interval : DEFAULT_DISCOVERY_MS;
}
