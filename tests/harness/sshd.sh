#!/usr/bin/env bash
# tests/harness/sshd.sh start|stop DIR
#
# A private OpenSSH server for tests: keys generated in DIR, listening on a
# high port of the loopback addresses 127.0.0.1 to 127.0.0.8 only (which
# tests use as distinct hosts), and a client configuration beside it:
#
#   ssh -F DIR/ssh_config 127.0.0.2 true
#
# start prints nothing on success and leaves DIR/port, DIR/ssh_config,
# DIR/sshd.pid and DIR/sshd.log; stop kills the sshd whose pid it wrote
# (and nothing else).  Needs root (sshd checks its privilege separation
# user) and Debian's openssh-server and openssh-client; exits 77 when they
# are missing, so a test can skip.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# Hosts the server answers on; 127.0.0.9 and above stay unreachable.
hosts=(127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5 127.0.0.6 127.0.0.7 127.0.0.8)

stop() {
	[ -f "$dir/sshd.pid" ] || return 0
	local pid
	pid=$(cat "$dir/sshd.pid")
	# Only our own sshd: the pid must still be an sshd started with our config.
	if [ -n "$pid" ] && grep -qF "$dir/sshd_config" "/proc/$pid/cmdline" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/sshd.pid"
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
		{
			echo "Port $port"
			for h in "${hosts[@]}"; do echo "ListenAddress $h"; done
			cat <<-EOF
			HostKey $dir/host_ed25519
			PidFile $dir/sshd.pid
			AuthorizedKeysFile $dir/authorized_keys
			PermitRootLogin prohibit-password
			PubkeyAuthentication yes
			PasswordAuthentication no
			KbdInteractiveAuthentication no
			StrictModes no
			UsePAM no
			PrintMotd no
			PrintLastLog no
			X11Forwarding no
			AllowTcpForwarding no
			MaxStartups 200:30:400
			MaxSessions 200
			LogLevel VERBOSE
			AcceptEnv ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS HERD_LOG
			EOF
		} >"$dir/sshd_config"
		: >"$dir/sshd.log"
		# sshd binds its addresses before it daemonizes and fails only
		# when it could bind none of them; one address whose port was
		# taken between our pick and its bind is only logged, so the log
		# is read too, and such an sshd is stopped and another port tried.
		# The daemon writes its pid file a moment after it forks.
		if /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"; then
			for _ in $(seq 100); do
				[ -s "$dir/sshd.pid" ] && break
				sleep 0.05
			done
			grep -q "Bind to port" "$dir/sshd.log" || break
			stop
		fi
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
	cat >"$dir/ssh_config" <<-EOF
	Host *
	    Port $port
	    User $(id -un)
	    IdentityFile $dir/id_ed25519
	    IdentitiesOnly yes
	    UserKnownHostsFile $dir/known_hosts
	    GlobalKnownHostsFile /dev/null
	    StrictHostKeyChecking yes
	    BatchMode yes
	    ControlMaster no
	    ControlPath none
	    LogLevel ERROR
	    SendEnv ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS HERD_LOG
	EOF

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
