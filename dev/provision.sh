#!/usr/bin/env bash
# dev/provision.sh COMMAND...: provisions what the test suite needs, runs
# COMMAND with it, and tears it down. The one provisioning script: `make test`
# and CI (.ci/run) both go through it, so a fresh machine runs the suite the
# way CI does.
#
# What it provides:
#   - redis-server, tmux (the CLI's terminal streaming test), chromium (the
#     console's browser tests) and the PostgreSQL server binaries (initdb,
#     pg_ctl, postgres). A missing one is installed from Debian's packages
#     when we are root (apt-get); otherwise the tests that need it are
#     skipped, and this script says so loudly, before and after the run.
#   - one ephemeral PostgreSQL (run as the 'postgres' OS user with
#     `runuser -u postgres --` when we are root: PostgreSQL refuses root) and
#     one ephemeral Redis on free loopback ports for the whole run, handed to
#     every test binary in AGENTRY_TEST_POSTGRES_DSN and
#     AGENTRY_TEST_REDIS_URL (dev/testenv gives each test its own database /
#     Redis DB index on them), removed on exit. AGENTRY_CI_SHARED_SERVICES=0
#     lets each test binary start its own servers instead; servers already
#     named in those variables are used as they are.
#
# Strictness: with CI=true or AGENTRY_TEST_REQUIRE_SERVICES=1 (what .ci/run
# sets) anything that cannot be provided fails the run; otherwise it is
# skipped with a warning. AGENTRY_TEST_WITHOUT=postgres,redis,chromium
# pretends those are not installed, to try the suite as a fresh unprivileged
# machine would run it (nothing is installed for them then).
set -euo pipefail

cd "$(dirname "$0")/.."

[ $# -gt 0 ] || { echo "usage: dev/provision.sh COMMAND..." >&2; exit 2; }

strict=0
if [ "${CI:-}" = "true" ] || [ "${AGENTRY_TEST_REQUIRE_SERVICES:-}" = "1" ]; then
	strict=1
fi

timings=()
missing=()
now() { date +%s.%N; }
# phase NAME COMMAND...: runs one phase and records how long it took.
phase() {
	local name=$1
	shift
	echo "==> ${name}"
	local start
	start=$(now)
	"$@"
	local secs
	secs=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	timings+=("$(printf '%-32s %8ss' "$name" "$secs")")
}

fail() {
	echo "provision: $*" >&2
	exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# pretend_missing NAME: AGENTRY_TEST_WITHOUT lists NAME.
pretend_missing() {
	case ",${AGENTRY_TEST_WITHOUT:-}," in *",$1,"*) return 0 ;; esac
	return 1
}

# unavailable WHAT WHY: fails in strict mode, else records a loud skip.
unavailable() {
	if [ "$strict" = 1 ]; then
		fail "$1 is required (CI=true or AGENTRY_TEST_REQUIRE_SERVICES=1) but unavailable: $2"
	fi
	missing+=("$1: $2")
	echo "!!!!!!!! $1 unavailable, its tests will be SKIPPED: $2 !!!!!!!!" >&2
}

apt_updated=0
# apt_install PACKAGE...: Debian's packages, as root only.
apt_install() {
	if [ "$apt_updated" = 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -q
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# ensure_cmd COMMAND PACKAGE [NAME]: the command is there, or installed from
# Debian's PACKAGE when root, or reported unavailable. Returns 1 when absent.
# NAME is what AGENTRY_TEST_WITHOUT calls it.
ensure_cmd() {
	local cmd=$1 pkg=$2 name=${3:-}
	if [ -n "$name" ] && pretend_missing "$name"; then
		unavailable "$cmd" "AGENTRY_TEST_WITHOUT names it"
		return 1
	fi
	if command -v "$cmd" >/dev/null; then
		echo "$cmd present: $(command -v "$cmd")"
		return 0
	fi
	if ! is_root; then
		unavailable "$cmd" "not installed and not root to install Debian's package $pkg (sudo apt-get install $pkg)"
		return 1
	fi
	echo "$cmd missing; installing Debian's package $pkg"
	apt_install "$pkg" || true
	if ! command -v "$cmd" >/dev/null; then
		unavailable "$cmd" "still missing after apt-get install $pkg"
		return 1
	fi
}

tools() {
	ensure_cmd tmux tmux || true
	# The run_python sandbox (bubblewrap) and the ssh executor's tests (a
	# real sshd on loopback): docs/sandbox.md.
	ensure_cmd bwrap bubblewrap || true
	[ -x /usr/sbin/sshd ] || ensure_cmd sshd openssh-server || true
	ensure_cmd chromium chromium chromium || true
	if pretend_missing chromium; then
		# dev/testenv looks chromium up itself: hide it.
		export AGENTRY_TEST_CHROMIUM=/nonexistent/chromium-hidden-by-AGENTRY_TEST_WITHOUT
	fi
	if ensure_cmd redis-server redis-server redis; then
		echo "redis: $(redis-server --version)"
		HAVE_REDIS=1
	fi
}

# The OpenAI Node SDK of e2e/openai_compat_test.go (dev/openai-node): node
# and npm from Debian when absent, then `npm ci` of its lockfile into
# dev/openai-node/node_modules (the test runs it itself when missing).
openai_node() {
	ensure_cmd node nodejs node || return 0
	ensure_cmd npm npm node || return 0
	if [ ! -d dev/openai-node/node_modules/openai ]; then
		(cd dev/openai-node && npm ci --no-audit --no-fund) || unavailable "openai (npm)" "npm ci in dev/openai-node failed"
	fi
}

PG_BIN=""
find_postgres() {
	local initdb dir
	if initdb=$(command -v initdb) && command -v pg_ctl >/dev/null; then
		PG_BIN=$(dirname "$(readlink -f "$initdb")")
		return
	fi
	for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
		if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
			PG_BIN=$dir
			return
		fi
	done
}

postgres_binaries() {
	if pretend_missing postgres; then
		unavailable PostgreSQL "AGENTRY_TEST_WITHOUT names it"
		return
	fi
	find_postgres
	if [ -z "$PG_BIN" ] && is_root; then
		echo "PostgreSQL server binaries missing; installing Debian's package postgresql-15"
		apt_install postgresql-15 || apt_install postgresql || true
		find_postgres
	fi
	if [ -z "$PG_BIN" ]; then
		unavailable PostgreSQL "server binaries (initdb, pg_ctl) not on PATH nor in /usr/lib/postgresql/*/bin (apt-get install postgresql-15)"
		return
	fi
	for tool in initdb pg_ctl postgres; do
		[ -x "$PG_BIN/$tool" ] || fail "$PG_BIN/$tool missing: the PostgreSQL server installation is incomplete"
	done
	if is_root && ! id postgres >/dev/null 2>&1; then
		unavailable PostgreSQL "running as root, PostgreSQL refuses root, and there is no 'postgres' OS user to run it as"
		PG_BIN=""
		return
	fi
	echo "PostgreSQL binaries: $PG_BIN ($("$PG_BIN/postgres" --version))"
	pgvector
	# dev/testenv looks initdb up on PATH too.
	case ":$PATH:" in *":$PG_BIN:"*) ;; *) export PATH="$PATH:$PG_BIN" ;; esac
}

# pgvector: the vector store's PostgreSQL tests run on it where the
# distribution packages it for this server (postgresql-<major>-pgvector;
# Debian 12 has none), and on the store's documented fallback otherwise
# (internal/vector/postgres), so its absence is reported, not a failure.
pgvector() {
	local major
	major=$("$PG_BIN/postgres" --version | sed -E 's/[^0-9]*([0-9]+).*/\1/')
	if ls /usr/share/postgresql/"$major"/extension/vector.control >/dev/null 2>&1; then
		echo "pgvector present"
		return
	fi
	if is_root && ! pretend_missing pgvector; then
		apt_install "postgresql-$major-pgvector" >/dev/null 2>&1 || true
	fi
	if ls /usr/share/postgresql/"$major"/extension/vector.control >/dev/null 2>&1; then
		echo "pgvector installed (postgresql-$major-pgvector)"
	else
		echo "pgvector not available (no postgresql-$major-pgvector package): the vector store's pgvector tests are skipped, its fallback is tested"
	fi
}

# A port below Linux's ephemeral range (32768+), so the :0 listeners the
# tests open never hold it, that nothing answers on yet.
free_port() {
	local port
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	fail "no free port found"
}

SERVICES_DIR=""
PG_DATA=""
REDIS_PIDFILE=""
HAVE_REDIS=0

# PostgreSQL refuses to run as root: run its tools as the postgres user.
as_pg() {
	if is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start_postgres() {
	if is_root; then
		chown postgres: "$SERVICES_DIR"
	fi
	PG_DATA="$SERVICES_DIR/pgdata"
	as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 --locale=C --no-sync --no-instructions >"$SERVICES_DIR/initdb.log" 2>&1 \
		|| { cat "$SERVICES_DIR/initdb.log" >&2; fail "initdb failed"; }
	local port attempt
	for attempt in 1 2 3; do
		port=$(free_port)
		if as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$SERVICES_DIR/postgres.log" -w -t 60 \
			-o "-p $port -k $SERVICES_DIR -c listen_addresses=127.0.0.1 -c max_connections=500 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
			start >/dev/null; then
			export AGENTRY_TEST_POSTGRES_DSN="host=127.0.0.1 port=$port user=postgres dbname=postgres sslmode=disable"
			echo "PostgreSQL on 127.0.0.1:$port"
			return
		fi
		echo "PostgreSQL did not start on port $port (attempt $attempt):" >&2
		tail -n 20 "$SERVICES_DIR/postgres.log" >&2 || true
	done
	fail "PostgreSQL did not start"
}

redis_ping() {
	local reply
	exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
	printf 'PING\r\n' >&3
	read -r -t 2 reply <&3 || true
	exec 3<&- 3>&-
	[[ $reply == "+PONG"* ]]
}

start_redis() {
	local port attempt
	REDIS_PIDFILE="$SERVICES_DIR/redis.pid"
	for attempt in 1 2 3; do
		port=$(free_port)
		# Many databases: dev/testenv isolates each test by DB index.
		redis-server --port "$port" --bind 127.0.0.1 --dir "$SERVICES_DIR" --save "" --appendonly no \
			--databases 4096 --daemonize yes --pidfile "$REDIS_PIDFILE" --logfile "$SERVICES_DIR/redis.log"
		for _ in $(seq 100); do
			if redis_ping "$port" 2>/dev/null; then
				export AGENTRY_TEST_REDIS_URL="redis://127.0.0.1:$port"
				echo "Redis on 127.0.0.1:$port"
				return
			fi
			sleep 0.1
		done
		echo "Redis did not answer on port $port (attempt $attempt):" >&2
		tail -n 20 "$SERVICES_DIR/redis.log" >&2 || true
		[ -f "$REDIS_PIDFILE" ] && kill "$(cat "$REDIS_PIDFILE")" 2>/dev/null || true
	done
	fail "Redis did not start"
}

start_services() {
	SERVICES_DIR=$(mktemp -d /tmp/agentry-test-services.XXXXXX)
	if [ -n "$PG_BIN" ] && [ -z "${AGENTRY_TEST_POSTGRES_DSN:-}" ]; then
		start_postgres
	fi
	if [ "$HAVE_REDIS" = 1 ] && [ -z "${AGENTRY_TEST_REDIS_URL:-}" ]; then
		start_redis
	fi
}

stop_services() {
	if [ -n "$PG_DATA" ] && [ -f "$PG_DATA/postmaster.pid" ]; then
		as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w -t 30 stop >/dev/null || true
	fi
	if [ -n "$REDIS_PIDFILE" ] && [ -f "$REDIS_PIDFILE" ]; then
		local pid
		pid=$(cat "$REDIS_PIDFILE")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	if [ -n "$SERVICES_DIR" ]; then
		rm -rf "$SERVICES_DIR"
	fi
}

summary() {
	local rc=$?
	stop_services
	echo
	echo "==> timings"
	local line
	for line in "${timings[@]}"; do echo "    $line"; done
	if [ "${#missing[@]}" -gt 0 ]; then
		echo
		echo "!!!!!!!! SKIPPED for lack of a service or tool (tests needing them did not run):" >&2
		for line in "${missing[@]}"; do echo "!!!!!!!!   $line" >&2; done
	fi
	exit "$rc"
}
trap summary EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Tell dev/testenv which services the machine lacks, so it skips (or, in
# strict mode, fails) instead of trying to start them.
without_for_testenv() {
	local list=${AGENTRY_TEST_WITHOUT:-}
	[ -n "$PG_BIN" ] || list="$list,postgres"
	[ "$HAVE_REDIS" = 1 ] || list="$list,redis"
	export AGENTRY_TEST_WITHOUT=${list#,}
}

phase "tools (tmux, chromium, redis)" tools
phase "openai node sdk" openai_node
phase "postgres binaries" postgres_binaries
without_for_testenv
if [ "${AGENTRY_CI_SHARED_SERVICES:-1}" = "1" ]; then
	phase "start postgres + redis" start_services
fi
phase "$*" "$@"
