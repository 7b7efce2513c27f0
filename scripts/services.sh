#!/usr/bin/env bash
# Make sure the services the integration tests talk to are running on this machine:
# Redis on 127.0.0.1:6379 and PostgreSQL on 127.0.0.1:5432 (trust auth, user postgres).
# Starts them where they are installed but stopped; installs them from Debian's packages
# where they are missing and we are root. Fails loudly if either is still unreachable.
# Also installs Debian's chromium for the browser test where it is missing.
set -euo pipefail

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  for _ in $(seq 1 60); do port_open "$1" && return 0; sleep 0.5; done
  return 1
}

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "services: $* missing and cannot be installed (need root and apt-get)" >&2; exit 1
  fi
}

if ! port_open 6379; then
  command -v redis-server >/dev/null || apt_install redis-server
  mkdir -p /tmp/gemmwatch-redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp/gemmwatch-redis --logfile /tmp/gemmwatch-redis/redis.log
  wait_port 6379 || { echo "services: Redis did not start on 127.0.0.1:6379" >&2; exit 1; }
  echo "services: started Redis"
fi

if ! port_open 5432; then
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_port 5432 || { echo "services: PostgreSQL did not start on 127.0.0.1:5432" >&2; exit 1; }
  echo "services: started PostgreSQL $version"
fi

# The browser test (tests/test_browser.py) drives Debian's chromium through Playwright; no
# browser is ever downloaded, so install the distribution's one where it is missing.
if [ ! -x /usr/bin/chromium ]; then
  apt_install chromium
  [ -x /usr/bin/chromium ] || { echo "services: chromium did not install at /usr/bin/chromium" >&2; exit 1; }
  echo "services: installed chromium"
fi

# The tests connect as postgres over TCP without a password (trust), as this machine is set up.
psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null \
  || { echo "services: cannot log in to PostgreSQL as postgres on 127.0.0.1 (trust auth expected)" >&2; exit 1; }
echo "services: Redis and PostgreSQL are up"
