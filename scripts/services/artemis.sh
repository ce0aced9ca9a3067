#!/usr/bin/env bash
# Local ActiveMQ Artemis broker for Factflow development and CI.
#
#   bash scripts/services/artemis.sh start    fetch (once), create (once), start, wait for STOMP
#   bash scripts/services/artemis.sh stop     clean shutdown, waits for the JVM to exit
#   bash scripts/services/artemis.sh status   exit 0 and print the URL when STOMP answers
#   bash scripts/services/artemis.sh reset    stop and delete the instance (journal included)
#
# The broker binds loopback only. Everything lives under
# ${FACTFLOW_SERVICES_DIR:-$HOME/.cache/factflow/services}/artemis:
#   dist/       the apache-artemis bin distribution, fetched from Maven Central with mvn
#   instance/   the broker instance (etc/broker.xml is docker/artemis/broker.xml, re-applied on start)
#   stomp.url   the URL the broker answers on (what `start` and `status` print)
#
# Environment (all optional):
#   ARTEMIS_STOMP_PORT  preferred STOMP port (default 61613; the next free port is used if taken)
#   ARTEMIS_CORE_PORT   preferred core port for the artemis CLI (default 61616)
#   ARTEMIS_USER / ARTEMIS_PASSWORD   broker user (default factflow/factflow; anonymous allowed)
#   ARTEMIS_START_TIMEOUT  seconds to wait for STOMP (default 120)
#   JAVA_HOME           a Java 17+ runtime (default: /usr/lib/jvm/java-17-openjdk-amd64 if present)
set -euo pipefail

readonly ARTEMIS_VERSION="2.40.0"
readonly ARTIFACT="org.apache.activemq:apache-artemis:${ARTEMIS_VERSION}:tar.gz:bin"
readonly REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
readonly BROKER_XML="${REPO_ROOT}/docker/artemis/broker.xml"
readonly BASE_DIR="${FACTFLOW_SERVICES_DIR:-${HOME}/.cache/factflow/services}/artemis"
readonly DIST_DIR="${BASE_DIR}/dist"
readonly ARTEMIS_HOME="${DIST_DIR}/apache-artemis-${ARTEMIS_VERSION}"
readonly INSTANCE_DIR="${BASE_DIR}/instance"
readonly PID_FILE="${BASE_DIR}/broker.pid"
readonly URL_FILE="${BASE_DIR}/stomp.url"
readonly LOG_FILE="${BASE_DIR}/broker.out"
readonly HOST="127.0.0.1"

log() { printf '[artemis] %s\n' "$*" >&2; }
die() { printf '[artemis] error: %s\n' "$*" >&2; exit 1; }

# Answers 0 when a STOMP 1.2 CONNECT on host:port gets a CONNECTED frame back.
stomp_answers() {
  local port="$1" reply=""
  reply="$(timeout 3 bash -c '
    exec 3<>"/dev/tcp/$0/$1" || exit 1
    printf "CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:0,0\n\n\0" >&3
    head -c 9 <&3
    printf "DISCONNECT\n\n\0" >&3 2>/dev/null || true
  ' "${HOST}" "${port}" 2>/dev/null)" || return 1
  [[ "${reply}" == "CONNECTED" ]]
}

port_in_use() { (exec 3<>"/dev/tcp/${HOST}/$1") 2>/dev/null; }

broker_pid() {
  [[ -f "${PID_FILE}" ]] || return 1
  local pid
  pid="$(cat "${PID_FILE}")"
  [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null && echo "${pid}"
}

recorded_port() {
  [[ -f "${URL_FILE}" ]] || return 1
  sed -E 's#.*:([0-9]+)$#\1#' "${URL_FILE}"
}

# First free port at or after $1 (a port held by our own broker counts as ours, not taken).
pick_port() {
  local port="$1" last=$(( $1 + 20 ))
  while (( port <= last )); do
    if ! port_in_use "${port}"; then echo "${port}"; return 0; fi
    port=$(( port + 1 ))
  done
  return 1
}

resolve_java_home() {
  if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then echo "${JAVA_HOME}"; return; fi
  local candidate
  for candidate in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk /usr/lib/jvm/temurin-17-jdk-amd64; do
    if [[ -x "${candidate}/bin/java" ]]; then echo "${candidate}"; return; fi
  done
  local java_bin
  java_bin="$(command -v java)" || die "no Java runtime found; install Java 17 or set JAVA_HOME"
  dirname "$(dirname "$(readlink -f "${java_bin}")")"
}

fetch_distribution() {
  [[ -x "${ARTEMIS_HOME}/bin/artemis" ]] && return 0
  command -v mvn >/dev/null || die "mvn not found; install Maven (it fetches ${ARTIFACT})"
  mkdir -p "${DIST_DIR}"
  log "fetching ${ARTIFACT} with Maven (once)"
  local work
  work="$(mktemp -d "${DIST_DIR}/.fetch.XXXXXX")"
  # Run from an empty directory so no project pom is picked up.
  (cd "${work}" && mvn -q -B dependency:copy -Dartifact="${ARTIFACT}" -DoutputDirectory="${work}" >&2) \
    || { rm -rf "${work}"; die "mvn could not fetch ${ARTIFACT}; check network access to Maven Central"; }
  tar -xzf "${work}/apache-artemis-${ARTEMIS_VERSION}-bin.tar.gz" -C "${work}"
  mv "${work}/apache-artemis-${ARTEMIS_VERSION}" "${ARTEMIS_HOME}"
  rm -rf "${work}"
}

create_instance() {
  if [[ ! -f "${INSTANCE_DIR}/.factflow-${ARTEMIS_VERSION}" ]]; then
    log "creating broker instance in ${INSTANCE_DIR}"
    rm -rf "${INSTANCE_DIR}"
    JAVA_HOME="$1" "${ARTEMIS_HOME}/bin/artemis" create \
      --user "${ARTEMIS_USER:-factflow}" --password "${ARTEMIS_PASSWORD:-factflow}" \
      --allow-anonymous --silent --no-autotune --no-web --nio --force \
      --host "${HOST}" --java-memory 512M "${INSTANCE_DIR}" >"${BASE_DIR}/create.out" 2>&1 \
      || die "artemis create failed; see ${BASE_DIR}/create.out"
    touch "${INSTANCE_DIR}/.factflow-${ARTEMIS_VERSION}"
  fi
  # The committed configuration always wins over whatever `create` generated.
  cp "${BROKER_XML}" "${INSTANCE_DIR}/etc/broker.xml"
}

wait_for_stomp() {
  local port="$1" pid="$2" deadline=$(( SECONDS + ${ARTEMIS_START_TIMEOUT:-120} ))
  until stomp_answers "${port}"; do
    kill -0 "${pid}" 2>/dev/null || { tail -n 40 "${LOG_FILE}" >&2 || true; die "broker exited during start; log: ${LOG_FILE}"; }
    (( SECONDS < deadline )) || { tail -n 40 "${LOG_FILE}" >&2 || true; die "STOMP did not answer on ${HOST}:${port} within ${ARTEMIS_START_TIMEOUT:-120}s; log: ${LOG_FILE}"; }
    sleep 0.3
  done
}

cmd_start() {
  mkdir -p "${BASE_DIR}"
  local running_port pid
  if pid="$(broker_pid)" && running_port="$(recorded_port)" && stomp_answers "${running_port}"; then
    log "already running (pid ${pid})"
    cat "${URL_FILE}"
    return 0
  fi
  if pid="$(broker_pid)"; then
    # A broker of ours is alive but not (yet) answering: give it the normal start deadline.
    running_port="$(recorded_port)" || die "pid ${pid} is running but ${URL_FILE} is missing; run: $0 stop"
    wait_for_stomp "${running_port}" "${pid}"
    cat "${URL_FILE}"
    return 0
  fi

  local java_home stomp_port core_port
  java_home="$(resolve_java_home)"
  fetch_distribution
  create_instance "${java_home}"
  stomp_port="$(pick_port "${ARTEMIS_STOMP_PORT:-61613}")" || die "no free STOMP port near ${ARTEMIS_STOMP_PORT:-61613}"
  core_port="$(pick_port "${ARTEMIS_CORE_PORT:-61616}")" || die "no free core port near ${ARTEMIS_CORE_PORT:-61616}"
  [[ "${core_port}" != "${stomp_port}" ]] || core_port="$(pick_port $(( stomp_port + 1 )))"

  rm -f "${INSTANCE_DIR}/lock/STOP_ME"
  log "starting Artemis ${ARTEMIS_VERSION} (STOMP ${HOST}:${stomp_port}, core ${HOST}:${core_port})"
  JAVA_HOME="${java_home}" \
  JAVA_ARGS_APPEND="-Dfactflow.artemis.host=${HOST} -Dfactflow.artemis.stompPort=${stomp_port} -Dfactflow.artemis.corePort=${core_port}" \
    setsid nohup "${INSTANCE_DIR}/bin/artemis" run >"${LOG_FILE}" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "${pid}" >"${PID_FILE}"
  echo "stomp://${HOST}:${stomp_port}" >"${URL_FILE}"
  wait_for_stomp "${stomp_port}" "${pid}"
  log "ready (pid ${pid})"
  cat "${URL_FILE}"
}

cmd_stop() {
  local pid
  if ! pid="$(broker_pid)"; then
    log "not running"
    rm -f "${PID_FILE}"
    return 0
  fi
  log "stopping (pid ${pid})"
  # `artemis stop` asks the broker to shut down through a file in its lock directory.
  JAVA_HOME="$(resolve_java_home)" "${INSTANCE_DIR}/bin/artemis" stop >/dev/null 2>&1 || kill -TERM "${pid}" 2>/dev/null || true
  local deadline=$(( SECONDS + 60 ))
  while kill -0 "${pid}" 2>/dev/null; do
    if (( SECONDS >= deadline )); then
      log "did not exit within 60s; sending SIGTERM"
      kill -TERM "${pid}" 2>/dev/null || true
      sleep 5
      kill -0 "${pid}" 2>/dev/null && kill -KILL "${pid}" 2>/dev/null || true
      break
    fi
    sleep 0.3
  done
  rm -f "${PID_FILE}"
  log "stopped"
}

cmd_status() {
  local pid port
  if pid="$(broker_pid)" && port="$(recorded_port)" && stomp_answers "${port}"; then
    log "running (pid ${pid})"
    cat "${URL_FILE}"
    return 0
  fi
  log "not running"
  return 1
}

cmd_reset() {
  cmd_stop
  rm -rf "${INSTANCE_DIR}" "${URL_FILE}"
  log "instance removed (the downloaded distribution is kept)"
}

with_lock() {
  mkdir -p "${BASE_DIR}"
  if command -v flock >/dev/null; then
    exec 9>"${BASE_DIR}/.lock"
    flock -w 180 9 || die "another artemis.sh holds ${BASE_DIR}/.lock"
  fi
  "$@"
}

case "${1:-}" in
  start) with_lock cmd_start ;;
  stop) with_lock cmd_stop ;;
  status) cmd_status ;;
  reset) with_lock cmd_reset ;;
  *) echo "usage: $0 start|stop|status|reset" >&2; exit 2 ;;
esac
