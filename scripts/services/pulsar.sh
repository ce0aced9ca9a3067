#!/usr/bin/env bash
# Local Apache Pulsar standalone broker for Factflow development and CI.
#
#   bash scripts/services/pulsar.sh start    fetch the jars (once), start, wait for admin API + WebSocket
#   bash scripts/services/pulsar.sh stop     clean shutdown (SIGTERM, the broker's own shutdown hook)
#   bash scripts/services/pulsar.sh status   exit 0 and print the URLs when the broker answers
#   bash scripts/services/pulsar.sh reset    stop and delete the broker data (the jars are kept)
#
# There is no Pulsar server distribution on Maven Central, so the broker runs from the jars of
# pulsar-broker + pulsar-websocket (+ log4j 2), resolved with mvn into a cache, and is started with
# org.apache.pulsar.PulsarStandaloneStarter on Java 17. It binds loopback only. Everything lives under
# ${FACTFLOW_SERVICES_DIR:-$HOME/.cache/factflow/services}/pulsar:
#   fetch/pom.xml   the pom the jars are resolved from (written by this script)
#   lib/            the resolved jars (the classpath)
#   data/           bookkeeper + metadata (RocksDB) directories
#   standalone.conf docker/pulsar/standalone.conf with the ports chosen at start
#   web.url         the admin REST URL, e.g. http://127.0.0.1:8080
#   ws.url          the WebSocket API URL, e.g. ws://127.0.0.1:8080
#   broker.url      the binary protocol URL, e.g. pulsar://127.0.0.1:6650
#
# Environment (all optional):
#   PULSAR_WEB_PORT      preferred admin/WebSocket port (default 8080; the next free port if taken)
#   PULSAR_BROKER_PORT   preferred binary protocol port (default 6650)
#   PULSAR_BOOKIE_PORT   preferred bookie port (default 3181)
#   PULSAR_ZK_PORT       preferred port the starter reserves for its local metadata service (default 2181)
#   PULSAR_HEAP          JVM heap (default 512m); PULSAR_DIRECT_MEMORY (default 512m)
#   PULSAR_START_TIMEOUT seconds to wait for the broker (default 240; a cold start takes 60-90 s here)
#   JAVA_HOME            a Java 17 runtime (default: /usr/lib/jvm/java-17-openjdk-amd64 if present)
set -euo pipefail

readonly PULSAR_VERSION="4.0.7"
readonly LOG4J_VERSION="2.24.3"
readonly MIN_JARS=300
readonly REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
readonly CONF_SOURCE="${REPO_ROOT}/docker/pulsar/standalone.conf"
readonly LOG4J_SOURCE="${REPO_ROOT}/docker/pulsar/log4j2.properties"
readonly BASE_DIR="${FACTFLOW_SERVICES_DIR:-${HOME}/.cache/factflow/services}/pulsar"
readonly FETCH_DIR="${BASE_DIR}/fetch"
readonly LIB_DIR="${BASE_DIR}/lib"
readonly DATA_DIR="${BASE_DIR}/data"
readonly CONF_FILE="${BASE_DIR}/standalone.conf"
readonly PID_FILE="${BASE_DIR}/broker.pid"
readonly WEB_URL_FILE="${BASE_DIR}/web.url"
readonly WS_URL_FILE="${BASE_DIR}/ws.url"
readonly BROKER_URL_FILE="${BASE_DIR}/broker.url"
readonly LOG_FILE="${BASE_DIR}/broker.out"
readonly HOST="127.0.0.1"

log() { printf '[pulsar] %s\n' "$*" >&2; }
die() { printf '[pulsar] error: %s\n' "$*" >&2; exit 1; }

port_in_use() { (exec 3<>"/dev/tcp/${HOST}/$1") 2>/dev/null; }

# First free port at or after $1, skipping the ones already chosen ($2...).
pick_port() {
  local port="$1" last=$(( $1 + 20 ))
  shift
  while (( port <= last )); do
    if ! port_in_use "${port}" && [[ " $* " != *" ${port} "* ]]; then echo "${port}"; return 0; fi
    port=$(( port + 1 ))
  done
  return 1
}

broker_pid() {
  [[ -f "${PID_FILE}" ]] || return 1
  local pid
  pid="$(cat "${PID_FILE}")"
  [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null && echo "${pid}"
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

write_pom() {
  mkdir -p "${FETCH_DIR}"
  cat >"${FETCH_DIR}/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.factflow</groupId><artifactId>pulsar-standalone-fetch</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.pulsar</groupId><artifactId>pulsar-broker</artifactId><version>${PULSAR_VERSION}</version></dependency>
    <dependency><groupId>org.apache.pulsar</groupId><artifactId>pulsar-websocket</artifactId><version>${PULSAR_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>${LOG4J_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>${LOG4J_VERSION}</version></dependency>
  </dependencies>
</project>
EOF
}

jars_complete() {
  [[ -f "${LIB_DIR}/pulsar-broker-${PULSAR_VERSION}.jar" && -f "${LIB_DIR}/pulsar-websocket-${PULSAR_VERSION}.jar" \
    && -f "${LIB_DIR}/log4j-slf4j2-impl-${LOG4J_VERSION}.jar" && -f "${LIB_DIR}/.complete-${PULSAR_VERSION}" ]] && return 0
  # A cache filled before the marker existed: accept it when the jar count is plausible.
  local count
  count="$(find "${LIB_DIR}" -maxdepth 1 -name '*.jar' 2>/dev/null | wc -l)"
  if [[ -f "${LIB_DIR}/pulsar-broker-${PULSAR_VERSION}.jar" && -f "${LIB_DIR}/pulsar-websocket-${PULSAR_VERSION}.jar" ]] \
    && (( count >= MIN_JARS )); then
    touch "${LIB_DIR}/.complete-${PULSAR_VERSION}"
    return 0
  fi
  return 1
}

fetch_jars() {
  jars_complete && return 0
  command -v mvn >/dev/null || die "mvn not found; install Maven (it resolves pulsar-broker ${PULSAR_VERSION} from Maven Central)"
  write_pom
  log "resolving pulsar-broker ${PULSAR_VERSION} and its dependencies with Maven (once, ~235 MB)"
  local staging="${BASE_DIR}/lib.partial"
  rm -rf "${staging}"
  (cd "${FETCH_DIR}" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="${staging}" >"${BASE_DIR}/fetch.log" 2>&1) \
    || die "mvn could not resolve the Pulsar jars; see ${BASE_DIR}/fetch.log (needs access to Maven Central)"
  rm -rf "${LIB_DIR}"
  mv "${staging}" "${LIB_DIR}"
  touch "${LIB_DIR}/.complete-${PULSAR_VERSION}"
}

# The conf with the chosen ports; everything else comes from the committed file.
write_conf() {
  local web_port="$1" broker_port="$2"
  sed -E \
    -e "s/^webServicePort=.*/webServicePort=${web_port}/" \
    -e "s/^brokerServicePort=.*/brokerServicePort=${broker_port}/" \
    "${CONF_SOURCE}" >"${CONF_FILE}"
}

admin_answers() {
  local web_url="$1"
  curl -fsS --max-time 3 "${web_url}/admin/v2/tenants" 2>/dev/null | grep -q '"public"'
}

# A producer on a health topic over the WebSocket API; succeeds when the broker answers the send
# with a message id. Uses the `ws` package installed for @factflow/infra-pulsar.
websocket_answers() {
  local ws_url="$1"
  (cd "${REPO_ROOT}/packages/infra/pulsar" && timeout 15 node --input-type=module -e '
    import { createRequire } from "node:module";
    const require = createRequire(process.cwd() + "/package.json");
    let WebSocket;
    try { WebSocket = require("ws"); } catch { console.error("ws is not installed: run pnpm install"); process.exit(3); }
    const url = `${process.argv[1]}/ws/v2/producer/persistent/public/default/factflow-health`;
    const socket = new WebSocket(url);
    const fail = (why) => { console.error(why); process.exit(1); };
    socket.on("error", (error) => fail(String(error)));
    socket.on("open", () => socket.send(JSON.stringify({ payload: Buffer.from("ping").toString("base64"), context: "1" })));
    socket.on("message", (data) => {
      const reply = JSON.parse(String(data));
      if (reply.result === "ok" && reply.messageId) { socket.close(); process.exit(0); }
      fail(`unexpected reply ${String(data)}`);
    });
  ' "${ws_url}" >/dev/null 2>&1)
}

wait_ready() {
  local pid="$1" web_url ws_url deadline=$(( SECONDS + ${PULSAR_START_TIMEOUT:-240} ))
  web_url="$(cat "${WEB_URL_FILE}")"
  ws_url="$(cat "${WS_URL_FILE}")"
  until admin_answers "${web_url}" && websocket_answers "${ws_url}"; do
    kill -0 "${pid}" 2>/dev/null || { tail -n 40 "${LOG_FILE}" >&2 || true; die "broker exited during start; log: ${LOG_FILE}"; }
    (( SECONDS < deadline )) || { tail -n 40 "${LOG_FILE}" >&2 || true; die "broker did not answer on ${web_url} within ${PULSAR_START_TIMEOUT:-240}s; log: ${LOG_FILE}"; }
    sleep 1
  done
}

print_urls() { cat "${WEB_URL_FILE}" "${WS_URL_FILE}" "${BROKER_URL_FILE}"; }

cmd_start() {
  mkdir -p "${BASE_DIR}"
  local pid
  if pid="$(broker_pid)"; then
    [[ -f "${WEB_URL_FILE}" && -f "${WS_URL_FILE}" ]] || die "pid ${pid} is running but ${WEB_URL_FILE} is missing; run: $0 stop"
    if admin_answers "$(cat "${WEB_URL_FILE}")"; then log "already running (pid ${pid})"; fi
    wait_ready "${pid}"
    print_urls
    return 0
  fi

  local java_home web_port broker_port bookie_port zk_port
  java_home="$(resolve_java_home)"
  "${java_home}/bin/java" -version 2>&1 | grep -q 'version "17' \
    || log "warning: ${java_home} is not Java 17; Pulsar ${PULSAR_VERSION} is tested here on Java 17 (set JAVA_HOME)"
  fetch_jars
  web_port="$(pick_port "${PULSAR_WEB_PORT:-8080}")" || die "no free web port near ${PULSAR_WEB_PORT:-8080}"
  broker_port="$(pick_port "${PULSAR_BROKER_PORT:-6650}" "${web_port}")" || die "no free broker port near ${PULSAR_BROKER_PORT:-6650}"
  bookie_port="$(pick_port "${PULSAR_BOOKIE_PORT:-3181}" "${web_port}" "${broker_port}")" || die "no free bookie port near ${PULSAR_BOOKIE_PORT:-3181}"
  zk_port="$(pick_port "${PULSAR_ZK_PORT:-2181}" "${web_port}" "${broker_port}" "${bookie_port}")" || die "no free port near ${PULSAR_ZK_PORT:-2181}"
  write_conf "${web_port}" "${broker_port}"
  mkdir -p "${DATA_DIR}/bookkeeper" "${DATA_DIR}/metadata"

  echo "http://${HOST}:${web_port}" >"${WEB_URL_FILE}"
  echo "ws://${HOST}:${web_port}" >"${WS_URL_FILE}"
  echo "pulsar://${HOST}:${broker_port}" >"${BROKER_URL_FILE}"

  # The --add-opens flags are the ones Pulsar's own bin/pulsar launcher passes on Java 17.
  local -a jvm=(
    "-Xms128m" "-Xmx${PULSAR_HEAP:-512m}" "-XX:MaxDirectMemorySize=${PULSAR_DIRECT_MEMORY:-512m}"
    "-XX:+UseG1GC" "-XX:MaxGCPauseMillis=10"
    "-Dio.netty.tryReflectionSetAccessible=true" "-Dio.netty.leakDetectionLevel=disabled"
    "-Dlog4j2.configurationFile=${LOG4J_SOURCE}" "-Dpulsar.allocator.exit_on_oom=true"
    "--add-opens" "java.base/java.io=ALL-UNNAMED"
    "--add-opens" "java.base/java.lang=ALL-UNNAMED"
    "--add-opens" "java.base/java.nio=ALL-UNNAMED"
    "--add-opens" "java.base/java.util=ALL-UNNAMED"
    "--add-opens" "java.base/java.util.zip=ALL-UNNAMED"
    "--add-opens" "java.base/jdk.internal.misc=ALL-UNNAMED"
    "--add-opens" "java.base/jdk.internal.platform=ALL-UNNAMED"
    "--add-opens" "java.base/sun.net=ALL-UNNAMED"
    "--add-opens" "java.management/sun.management=ALL-UNNAMED"
    "--add-opens" "jdk.management/com.sun.management.internal=ALL-UNNAMED"
  )
  log "starting Pulsar ${PULSAR_VERSION} standalone (web ${HOST}:${web_port}, broker ${HOST}:${broker_port}, bookie ${bookie_port})"
  # The JVM itself is the background job (so $! is its pid, and `stop` signals the JVM), in a
  # session of its own, without the lock's file descriptor.
  cd "${BASE_DIR}"
  setsid nohup "${java_home}/bin/java" "${jvm[@]}" -cp "${LIB_DIR}/*" \
    org.apache.pulsar.PulsarStandaloneStarter -c "${CONF_FILE}" -nfw -nss \
    --bookkeeper-dir "${DATA_DIR}/bookkeeper" --metadata-dir "${DATA_DIR}/metadata" \
    --bookkeeper-port "${bookie_port}" --zookeeper-port "${zk_port}" \
    >"${LOG_FILE}" 2>&1 </dev/null 9>&- &
  pid=$!
  echo "${pid}" >"${PID_FILE}"
  wait_ready "${pid}"
  log "ready (pid ${pid})"
  print_urls
}

cmd_stop() {
  local pid
  if ! pid="$(broker_pid)"; then
    log "not running"
    rm -f "${PID_FILE}"
    return 0
  fi
  log "stopping (pid ${pid})"
  kill -TERM "${pid}" 2>/dev/null || true
  local deadline=$(( SECONDS + 60 ))
  while kill -0 "${pid}" 2>/dev/null; do
    if (( SECONDS >= deadline )); then
      log "did not exit within 60s; sending SIGKILL"
      kill -KILL "${pid}" 2>/dev/null || true
      break
    fi
    sleep 0.3
  done
  rm -f "${PID_FILE}"
  log "stopped"
}

cmd_status() {
  local pid
  if pid="$(broker_pid)" && [[ -f "${WEB_URL_FILE}" ]] && admin_answers "$(cat "${WEB_URL_FILE}")"; then
    log "running (pid ${pid})"
    print_urls
    return 0
  fi
  log "not running"
  return 1
}

cmd_reset() {
  cmd_stop
  rm -rf "${DATA_DIR}" "${WEB_URL_FILE}" "${WS_URL_FILE}" "${BROKER_URL_FILE}" "${CONF_FILE}"
  log "data removed (the jars are kept)"
}

with_lock() {
  mkdir -p "${BASE_DIR}"
  if command -v flock >/dev/null; then
    exec 9>"${BASE_DIR}/.lock"
    flock -w 300 9 || die "another pulsar.sh holds ${BASE_DIR}/.lock"
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
