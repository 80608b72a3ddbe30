#!/usr/bin/env bash
# Installs the Debian server packages tenure's tests and demo run, when their binaries are missing.
# Idempotent and fast when everything is present. Exits non-zero with a clear message otherwise.
set -euo pipefail

missing=()
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
[ -x /usr/bin/etcdctl ] || missing+=(etcd-client)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# The peers tenure is tested and benchmarked against: Apache Curator (compiled against at test
# time with javac, so a JDK, not only a JRE) and etcdctl (above).
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
[ -f /usr/share/java/curator-recipes.jar ] || missing+=(libcurator-recipes-java)
[ -f /usr/share/java/curator-framework.jar ] || missing+=(libcurator-framework-java)
[ -f /usr/share/java/curator-client.jar ] || missing+=(libcurator-client-java)
[ -f /usr/share/java/slf4j-nop.jar ] || missing+=(libslf4j-java)
# The production-store tests (issue 15): a transaction pooler, cluster set-up, certificates.
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# The chaos suite steps candidates' wall clocks with libfaketime.
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing+=(faketime)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "tenure: installing server packages: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "tenure: cannot install ${missing[*]}: not root and no passwordless sudo." >&2
    echo "tenure: install them with: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "tenure: cannot install ${missing[*]}: apt-get not found (tenure's kit expects Debian packages)." >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# The packages' service units must not start here (pgbouncer's would take port 6432); the kit
# runs the servers itself.
$SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null || { echo "tenure: apt-get update failed" >&2; exit 1; }
if ! $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/tmp/tenure-apt.log 2>&1; then
  echo "tenure: apt-get install ${missing[*]} failed; last lines of /tmp/tenure-apt.log:" >&2
  tail -n 20 /tmp/tenure-apt.log >&2
  exit 1
fi
# slf4j-simple makes ZooKeeper's log visible (without it logging is silently dropped).
if [ ! -f /usr/share/java/slf4j-simple.jar ]; then
  $SUDO apt-get install -y -qq --no-install-recommends libslf4j-java >/dev/null 2>&1 || true
fi
echo "tenure: server packages ready" >&2
