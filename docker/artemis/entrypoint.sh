#!/usr/bin/env bash
# Creates the broker instance on first start, applies Factflow's broker.xml (or a mounted override)
# and runs the broker in the foreground.
set -euo pipefail

instance=/var/lib/artemis-instance
if [[ ! -f "${instance}/etc/broker.xml" ]]; then
  /opt/activemq-artemis/bin/artemis create \
    --user "${ARTEMIS_USER}" --password "${ARTEMIS_PASSWORD}" --require-login \
    --silent --no-autotune --no-web --nio --force "${instance}"
fi

if [[ -f "${instance}/etc-override/broker.xml" ]]; then
  cp "${instance}/etc-override/broker.xml" "${instance}/etc/broker.xml"
else
  cp /opt/factflow/broker.xml "${instance}/etc/broker.xml"
fi

export JAVA_ARGS_APPEND="${JAVA_ARGS_APPEND:-} -Dfactflow.artemis.host=${FACTFLOW_ARTEMIS_HOST:-0.0.0.0}"
exec "${instance}/bin/artemis" run
