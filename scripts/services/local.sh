#!/usr/bin/env bash
# Makes sure the services this machine is expected to run (PostgreSQL 15, RabbitMQ) are up, starting
# them with the machine's own commands when they are installed but stopped. Prints one line each.
set -uo pipefail

wait_port() { # host port seconds
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.5
  done
  return 1
}

ensure() { # name port start-command
  local name=$1 port=$2 start=$3
  if wait_port 127.0.0.1 "$port" 1; then echo "[services] $name: up on 127.0.0.1:$port"; return 0; fi
  echo "[services] $name: not answering on 127.0.0.1:$port, starting it"
  bash -c "$start" >/dev/null 2>&1 || true
  if wait_port 127.0.0.1 "$port" 60; then echo "[services] $name: up on 127.0.0.1:$port"; return 0; fi
  echo "[services] $name: could not be started (tried: $start)" >&2
  return 1
}

status=0
ensure postgresql 5432 'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start' || status=1
ensure rabbitmq 5672 'rabbitmq-server -detached' || status=1
exit $status
