#!/usr/bin/env bash
# What the tests run beyond Python, made ready before `make test` runs them:
#   - each program of the table below, installed from Debian's packages when it is missing;
#   - PostgreSQL answering on 127.0.0.1:5432: its cluster started when it does not answer, or
#     made (trust auth over TCP, as the tests connect) when there is none; left alone when
#     GOVERNOR_TEST_POSTGRES_URL names another server.
# As root it installs and starts; as anyone else it prints the line to run as root and exits 1.
# With nothing missing it changes nothing (no package list is fetched).
#
#   bash tests/prerequisites.sh           install and start what is missing
#   bash tests/prerequisites.sh --check   only say what is missing (exit 1 if anything)
set -euo pipefail

# Every program a test runs, and the Debian package that has it. The tests find each one
# through tests/programs.py; tests/deploy/test_prerequisites.py fails for a program they run
# that this table does not name.
PROGRAMS=(
  "bash bash"                        # the README's tour, run as a reader pastes it
  "curl curl"                        # ... its calls
  "jq jq"                            # ... and the ids it takes out of responses
  "chromium chromium"                # the dashboard, driven by Playwright (no browser download)
  "promtool prometheus"              # the alert rules, checked and unit-tested
  "systemd-analyze systemd"          # the systemd unit, read by systemd's own parser
  "install coreutils"                # the unit's install steps, run against a scratch root
  "cp coreutils"
  "openssl openssl"                  # deploy/kubernetes/webhook-certs.sh's certificates
  "git git"                          # bench/compare.py's worktrees
  "make make"                        # the Makefile's targets, read by a dry run
  "node nodejs"                      # the OpenID Connect provider the sign-in tests run
  "npm npm"                          # ... installed from its lock (make test runs npm ci)
  "runuser util-linux"               # a private PostgreSQL run as its own user under root
  "pg_config postgresql"             # where PostgreSQL's server programs are
  "initdb postgresql"                # a private PostgreSQL cluster, stopped and restarted
  "pg_ctl postgresql"
  "createdb postgresql"
  "pg_isready postgresql"            # this script: whether PostgreSQL answers
  "pg_lsclusters postgresql"         # ... and Debian's tools to make and start a cluster
  "pg_createcluster postgresql"
  "pg_dropcluster postgresql"
  "pg_ctlcluster postgresql"
)
PG_HOST=127.0.0.1
PG_PORT=5432

check_only=false
case "${1:-}" in
  "") ;;
  --check) check_only=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

# PostgreSQL's server programs (initdb, pg_ctl) live where pg_config says, not on PATH.
found() {
  local bindir
  command -v "$1" >/dev/null 2>&1 && return 0
  bindir=$(pg_config --bindir 2>/dev/null) || return 1
  [[ -x $bindir/$1 ]]
}

# Fills `missing` (programs) and `packages` (each package once, in the table's order).
survey() {
  local entry program package
  missing=()
  packages=()
  for entry in "${PROGRAMS[@]}"; do
    program=${entry%% *}
    package=${entry##* }
    found "$program" && continue
    missing+=("$program ($package)")
    [[ " ${packages[*]} " == *" $package "* ]] || packages+=("$package")
  done
}

install_line() {
  echo "apt-get update && apt-get install -y ${packages[*]}"
}

survey
if ((${#missing[@]} > 0)); then
  if $check_only || ((EUID != 0)); then
    echo "The tests run programs that are not installed:"
    printf '  %s\n' "${missing[@]}"
    echo "Install them as root (or run make test as root):"
    echo "  $(install_line)"
    exit 1
  fi
  had_clusters=$(pg_lsclusters --no-header 2>/dev/null || true)
  echo "Installing what the tests run: ${packages[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${packages[@]}"
  survey
  if ((${#missing[@]} > 0)); then
    echo "Still missing after installing: ${missing[*]}" >&2
    exit 1
  fi
  # The cluster Debian's package has just made asks a password over TCP; the tests connect as
  # postgres without one. One made here and empty is made again below with trust.
  if [[ -z $had_clusters ]]; then
    pg_lsclusters --no-header | while read -r version name _; do
      pg_dropcluster --stop "$version" "$name"
    done
  fi
fi

if [[ -n ${GOVERNOR_TEST_POSTGRES_URL:-} ]]; then
  exit 0  # the tests use that server, not this machine's
fi
if pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; then
  exit 0
fi
if $check_only || ((EUID != 0)); then
  echo "PostgreSQL does not answer on $PG_HOST:$PG_PORT. Start it as root (or run make test as root):"
  echo "  pg_ctlcluster --skip-systemctl-redirect VERSION main start"
  exit 1
fi
cluster=$(pg_lsclusters --no-header | awk -v port="$PG_PORT" '$3 == port { print $1, $2; exit }')
if [[ -z $cluster ]]; then
  version=$(basename "$(dirname "$(pg_config --bindir)")")
  echo "Creating PostgreSQL $version's cluster main on port $PG_PORT (trust auth over TCP) ..."
  pg_createcluster --port "$PG_PORT" "$version" main -- --auth-host=trust --auth-local=peer
  cluster="$version main"
fi
echo "Starting PostgreSQL ($cluster) ..."
# shellcheck disable=SC2086 # the cluster's version and name, two words
pg_ctlcluster --skip-systemctl-redirect $cluster start
for _ in $(seq 1 30); do
  pg_isready -q -h "$PG_HOST" -p "$PG_PORT" && exit 0
  sleep 1
done
pg_isready -h "$PG_HOST" -p "$PG_PORT"
