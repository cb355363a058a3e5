#!/usr/bin/env bash
# tests/harness/sshd.sh start|stop DIR
#
# A private OpenSSH server for tests: keys generated in DIR, listening on a
# high port of the loopback addresses 127.0.0.1 to 127.0.0.8 only (or to
# 127.0.0.N with SSHD_HARNESS_HOSTS=N), which tests use as distinct hosts,
# and a client configuration beside it:
#
#   ssh -F DIR/ssh_config 127.0.0.2 true
#
# start prints nothing on success and leaves DIR/port, DIR/ssh_config,
# DIR/sshd.pid and DIR/sshd.log; stop kills the sshd whose pid it wrote
# (and nothing else).  Needs root (sshd checks its privilege separation
# user) and Debian's openssh-server and openssh-client; exits 77 when they
# are missing, so a test can skip.
set -euo pipefail
source "$(dirname "$0")/sshd_lib.sh"

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# Hosts the server answers on, 127.0.0.1 to 127.0.0.N with N from
# SSHD_HARNESS_HOSTS (default 8; at most 250); the addresses above stay
# unreachable.
nhosts=${SSHD_HARNESS_HOSTS:-8}
[[ $nhosts =~ ^[0-9]+$ ]] && [ "$nhosts" -ge 1 ] && [ "$nhosts" -le 250 ] || {
	echo "sshd.sh: SSHD_HARNESS_HOSTS=$nhosts: want 1 to 250" >&2
	exit 2
}
hosts=()
for ((i = 1; i <= nhosts; i++)); do hosts+=("127.0.0.$i"); done

# sshd listens on at most 16 addresses (MAX_LISTEN_SOCKS): one server per
# 16 hosts, all on the same port with the same keys, sshd_config.G and
# sshd.G.pid for group G (group 0 keeps the names sshd_config, sshd.pid).
groups=$(( (nhosts + 15) / 16 ))
conf_of() { if [ "$1" -eq 0 ]; then echo "$dir/sshd_config"; else echo "$dir/sshd_config.$1"; fi; }
pid_of() { if [ "$1" -eq 0 ]; then echo "$dir/sshd.pid"; else echo "$dir/sshd.$1.pid"; fi; }

# Stops every server whose pid file is in DIR, whatever SSHD_HARNESS_HOSTS
# is now.
stop() {
	local pid file
	for file in "$dir"/sshd.pid "$dir"/sshd.*.pid; do
		[ -f "$file" ] || continue
		pid=$(cat "$file")
		# Only our own sshd: the pid must still be an sshd started with a
		# configuration of this directory.
		if [ -n "$pid" ] && grep -qF "$dir/sshd_config" "/proc/$pid/cmdline" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -9 "$pid" 2>/dev/null || true
		fi
		rm -f "$file"
	done
}

start() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "sshd.sh: needs root" >&2
		exit 77
	fi
	for prog in /usr/sbin/sshd ssh ssh-keygen; do
		if ! command -v "$prog" >/dev/null; then
			echo "sshd.sh: $prog not found (Debian packages openssh-server, openssh-client)" >&2
			exit 77
		fi
	done
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	local home
	home=$(login_home sshd.sh)
	mkdir -p -m 0700 "$dir/home"
	# sshd refuses to start without its privilege separation directory.
	mkdir -p /run/sshd
	chmod 0755 /run/sshd
	rm -f "$dir"/host_ed25519* "$dir"/id_ed25519*
	ssh-keygen -q -t ed25519 -N '' -C herd-test-host -f "$dir/host_ed25519"
	ssh-keygen -q -t ed25519 -N '' -C herd-test-user -f "$dir/id_ed25519"
	cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
	chmod 0600 "$dir/authorized_keys" "$dir/id_ed25519" "$dir/host_ed25519"

	local port tries=0
	while :; do
		tries=$((tries + 1))
		# SSHD_HARNESS_FIRST_PORT: the port of the first try (a test
		# that holds it proves the harness moves on).
		if [ $tries -eq 1 ] && [ -n "${SSHD_HARNESS_FIRST_PORT:-}" ]; then
			port=$SSHD_HARNESS_FIRST_PORT
		else
			port=$((20000 + RANDOM % 30000))
		fi
		local g ok=1
		: >"$dir/sshd.log"
		for ((g = 0; g < groups; g++)); do
			{
				echo "Port $port"
				for h in "${hosts[@]:$((g * 16)):16}"; do echo "ListenAddress $h"; done
				echo "LogLevel VERBOSE"
				sshd_options "$dir" "$(pid_of $g)"
			} >"$(conf_of $g)"
			# sshd binds its addresses before it daemonizes and fails only
			# when it could bind none of them; one address whose port was
			# taken between our pick and its bind is only logged, so the
			# log is read too, and such servers are stopped and another
			# port tried.  The daemon writes its pid file a moment after
			# it forks.
			# Its sessions get a home directory of their own (login_home).
			if unshare --mount sh -c "mount --bind '$dir/home' '$home' && exec /usr/sbin/sshd -f '$(conf_of $g)' -E '$dir/sshd.log'"; then
				for _ in $(seq 100); do
					[ -s "$(pid_of $g)" ] && break
					sleep 0.05
				done
			else
				ok=0
			fi
		done
		if [ $ok -eq 1 ] && ! grep -q "Bind to port" "$dir/sshd.log"; then
			break
		fi
		stop
		if [ $tries -ge 10 ]; then
			echo "sshd.sh: sshd did not start:" >&2
			tail -5 "$dir/sshd.log" >&2
			exit 1
		fi
	done
	echo "$port" >"$dir/port"

	# The client trusts exactly this server's host key on these addresses.
	local key
	key=$(cut -d' ' -f1-2 "$dir/host_ed25519.pub")
	: >"$dir/known_hosts"
	for h in "${hosts[@]}"; do echo "[$h]:$port $key" >>"$dir/known_hosts"; done
	{
		echo "Host *"
		echo "    Port $port"
		ssh_options "$dir"
	} >"$dir/ssh_config"

	# Up when a login works (bounded: 10 s).
	for _ in $(seq 100); do
		if ssh -F "$dir/ssh_config" -o ConnectTimeout=2 127.0.0.1 true 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "sshd.sh: cannot log in to sshd on port $port:" >&2
	ssh -F "$dir/ssh_config" -o ConnectTimeout=2 127.0.0.1 true || true
	tail -5 "$dir/sshd.log" >&2
	stop
	exit 1
}

case $cmd in
start) start ;;
stop) stop ;;
*) usage ;;
esac
