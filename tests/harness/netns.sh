#!/usr/bin/env bash
# tests/harness/netns.sh start|stop DIR [N]
# tests/harness/netns.sh cut|mend|shape|loss|delay|clear DIR I [ARG]
#
# A test cluster on this machine: N hosts (default 4, at most 64) as Linux
# network namespaces joined by veth pairs to a bridge that lives in a
# namespace of its own, so that no packet touches this machine's own
# network stack.  Host i (1..N) is the namespace herd-<id>-h<i>, with
#
#   eth0     10.77.0.<i>/24 on the bridge (its name h<i> in /etc/hosts there)
#   docker0  a bridge with 172.17.0.1/16, the same on every host, as Docker
#            leaves it (an address no other host can reach)
#   lan1     an unrouted interface with 192.168.<i>.1/24 (one end of a veth
#            pair whose other end, lan1p, stays in the host)
#
# a UTS namespace whose host name is h<i>, an OpenSSH server of its own
# and, for its ssh sessions, a home directory of its own (empty), in a
# mount namespace of the host's.  Commands run on a host with
#
#   DIR/run <i> CMD...        (ip netns exec, as the host's own processes)
#   ssh -F DIR/ssh_config h2 CMD   (from inside any host)
#   DIR/rsh [SSH OPTIONS] h2 CMD...   (from anywhere, inside a host too:
#                  ssh's stand-in without its crypto, for fan-out benchmarks;
#                  the ssh options are ignored, HOST is h<i> or 10.77.0.<i>;
#                  CMD runs as an ssh session's would: SHELL -c "CMD...", in the
#                  host's network, UTS and mount namespaces and its home
#                  directory, with a login's environment only)
#
# NETNS_SSHD=0 starts no sshd (64 of them take a while to start and to
# answer): DIR/rsh and DIR/run still work, ssh does not.  Then a process
# of the host's (a sleep) holds its UTS and mount namespaces instead of
# sshd.  DIR/host.<i>.pid is the pid whose namespaces are host i's (its
# sshd's, or that sleep's).
#
# start leaves DIR/hosts (the names, one per line), DIR/ssh_config and
# DIR/id (the cluster's id).  Faults on host I's link (eth0), each undone
# by clear (and all by stop):
#
#   cut I          the link down (ip link set eth0 down); mend I: up again
#   shape I RATE   both directions limited to RATE (tc tbf, e.g. 100mbit)
#   loss I PCT     PCT% of the packets in and out dropped at random (an
#                  nftables rule numgen random mod 100 < PCT drop)
#   delay I MS     every byte of the host's TCP connections, ssh excepted,
#                  held MS milliseconds each way (tests/harness/
#                  delay_relay.py, a transparent relay the host's nftables
#                  rules send its connections through: tc netem may be
#                  missing from the kernel)
#
# stop removes every namespace, link, file under
# /etc/netns and process that start made (only those: by the id and the
# pids it wrote), also after a partial start.  Needs root, iproute2 and
# openssh-server; exits 77 when namespaces cannot be made here.
set -euo pipefail
source "$(dirname "$0")/sshd_lib.sh"

usage() {
	echo "usage: $0 start|stop DIR [N] | cut|mend|shape|loss|delay|clear DIR I [ARG]" >&2
	exit 2
}
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
n=${3:-4}
case $cmd in
start | stop) [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 64 ] || usage ;;
*) [[ $n =~ ^[0-9]+$ ]] || usage ;;
esac
RELAY_PORT=47999
RELAY_MARK=0x4c7
SSHD=${NETNS_SSHD:-1}

ns_of() { echo "herd-$(cat "$dir/id")-h$1"; }
switch_of() { echo "herd-$(cat "$dir/id")-sw"; }

stop() {
	[ -f "$dir/id" ] || return 0
	local id ns pid
	id=$(cat "$dir/id")
	for f in "$dir"/sshd.*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		if [ -n "$pid" ] && grep -qF "$dir/sshd_config" "/proc/$pid/cmdline" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
		fi
		rm -f "$f"
	done
	rm -f "$dir"/host.*.pid "$dir/rsh"
	# Whatever still runs in the cluster's namespaces is the cluster's.
	for ns in $(ip netns list | awk '{print $1}' | grep "^herd-$id-" || true); do
		for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
			kill -9 "$pid" 2>/dev/null || true
		done
		ip netns del "$ns" 2>/dev/null || true
		rm -rf "/etc/netns/$ns"
	done
	rm -f "$dir/id"
}

start() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "netns.sh: needs root" >&2
		exit 77
	fi
	for prog in ip /usr/sbin/sshd ssh ssh-keygen unshare nsenter; do
		command -v "$prog" >/dev/null || { echo "netns.sh: $prog not found" >&2; exit 77; }
	done
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	printf '%04x%04x' $((RANDOM)) $$ >"$dir/id"
	if ! ip netns add "$(switch_of)" 2>"$dir/netns.err"; then
		echo "netns.sh: cannot make a network namespace: $(cat "$dir/netns.err")" >&2
		rm -f "$dir/id"
		exit 77
	fi
	trap 'stop' ERR
	local sw i ns hosts_file home
	home=$(login_home netns.sh)
	sw=$(switch_of)
	ip -n "$sw" link add br0 type bridge
	ip -n "$sw" link set br0 up
	mkdir -p /run/sshd
	rm -f "$dir"/host_ed25519* "$dir"/id_ed25519*
	ssh-keygen -q -t ed25519 -N '' -C herd-cluster-host -f "$dir/host_ed25519"
	ssh-keygen -q -t ed25519 -N '' -C herd-cluster-user -f "$dir/id_ed25519"
	cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
	chmod 0600 "$dir/authorized_keys" "$dir/id_ed25519" "$dir/host_ed25519"
	hosts_file=$dir/etc_hosts
	{
		echo "127.0.0.1 localhost"
		for ((i = 1; i <= n; i++)); do echo "10.77.0.$i h$i"; done
	} >"$hosts_file"
	: >"$dir/hosts"
	: >"$dir/known_hosts"
	for ((i = 1; i <= n; i++)); do
		ns=$(ns_of $i)
		ip netns add "$ns"
		ip link add "hv$i-$(cat "$dir/id")" type veth peer name eth0 netns "$ns" 2>/dev/null ||
			ip link add "hv$i" type veth peer name eth0 netns "$ns"
		# The switch end goes into the switch's namespace.
		local sw_end
		sw_end=$(ip -o link show | awk -F': ' '{print $2}' | grep -E "^hv$i(-$(cat "$dir/id"))?@" | cut -d@ -f1 | head -1)
		ip link set "$sw_end" netns "$sw"
		ip -n "$sw" link set "$sw_end" master br0 up
		ip -n "$ns" link set lo up
		ip -n "$ns" addr add "10.77.0.$i/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link add docker0 type bridge
		ip -n "$ns" addr add 172.17.0.1/16 dev docker0
		ip -n "$ns" link set docker0 up
		# (a veth pair inside the host: the dummy driver may be absent)
		ip -n "$ns" link add lan1 type veth peer name lan1p
		ip -n "$ns" addr add "192.168.$i.1/24" dev lan1
		ip -n "$ns" link set lan1p up
		ip -n "$ns" link set lan1 up
		mkdir -p "/etc/netns/$ns"
		cp "$hosts_file" "/etc/netns/$ns/hosts"
		echo "h$i" >>"$dir/hosts"
		echo "h$i $(cut -d' ' -f1-2 "$dir/host_ed25519.pub")" >>"$dir/known_hosts"
		{
			echo "Port 22"
			echo "ListenAddress 10.77.0.$i"
			sshd_options "$dir" "$dir/sshd.$i.pid"
		} >"$dir/sshd_config.$i"
		# sshd_config.N names the pid file sshd.N.pid: stop knows it by both.
		sed -i "1i # $dir/sshd_config" "$dir/sshd_config.$i"
		# A fresh home directory for the host's sessions (login_home): a
		# host is a machine of its own.
		mkdir -p -m 0700 "$dir/home/h$i"
		if [ "$SSHD" != 0 ]; then
			ip netns exec "$ns" unshare --uts --mount sh -c "mount --bind '$dir/home/h$i' '$home' && hostname h$i && exec /usr/sbin/sshd -f '$dir/sshd_config.$i' -E '$dir/sshd.$i.log'"
		else
			# The host's namespaces held by a sleep (stop ends it with
			# the namespace's other processes).
			ip netns exec "$ns" unshare --uts --mount sh -c "mount --bind '$dir/home/h$i' '$home' && hostname h$i && echo \$\$ >'$dir/host.$i.pid.new' && exec sleep infinity" \
				</dev/null >/dev/null 2>"$dir/host.$i.err" &
		fi
	done
	{
		echo "Host *"
		ssh_options "$dir"
	} >"$dir/ssh_config"
	cat >"$dir/run" <<-EOF
	#!/bin/sh
	# run I CMD...: CMD on host I, in its network and UTS namespaces.
	i=\$1; shift
	exec ip netns exec "herd-$(cat "$dir/id")-h\$i" unshare --uts sh -c 'hostname "h\$0"; exec "\$@"' "\$i" "\$@"
	EOF
	chmod +x "$dir/run"
	write_rsh "$home"
	if [ "$SSHD" = 0 ]; then
		wait_sleepers
		trap - ERR
		return
	fi
	# Up when every host answers ssh from host 1 (bounded: 10 s each).
	for ((i = 1; i <= n; i++)); do
		local ok=0
		for _ in $(seq 100); do
			if "$dir/run" 1 ssh -F "$dir/ssh_config" -o ConnectTimeout=2 "h$i" true 2>/dev/null; then
				ok=1
				break
			fi
			sleep 0.1
		done
		if [ $ok -eq 0 ]; then
			echo "netns.sh: h$i does not answer ssh:" >&2
			"$dir/run" 1 ssh -F "$dir/ssh_config" -o ConnectTimeout=2 "h$i" true >&2 || true
			tail -3 "$dir/sshd.$i.log" >&2 || true
			stop
			exit 1
		fi
		cp "$dir/sshd.$i.pid" "$dir/host.$i.pid"
	done
	trap - ERR
}

# Without sshd: up when every host's sleep has written its pid (bounded: 10
# s in all) and host 1 reaches every host's address (a connection refused is
# an answer; bounded: 2 s each).
wait_sleepers() {
	local i ok
	for ((i = 1; i <= n; i++)); do
		for _ in $(seq 100); do
			[ -s "$dir/host.$i.pid.new" ] && break
			sleep 0.1
		done
		if [ ! -s "$dir/host.$i.pid.new" ]; then
			echo "netns.sh: h$i's namespaces did not come up: $(cat "$dir/host.$i.err" 2>/dev/null)" >&2
			stop
			exit 1
		fi
		mv "$dir/host.$i.pid.new" "$dir/host.$i.pid"
		rm -f "$dir/host.$i.err"
	done
	for ((i = 2; i <= n; i++)); do
		ok=$(ip netns exec "$(ns_of 1)" timeout 2 bash -c "exec 3<>/dev/tcp/10.77.0.$i/9" 2>&1 || true)
		case $ok in
		*refused*) ;;
		*)
			echo "netns.sh: h1 does not reach h$i (10.77.0.$i): $ok" >&2
			stop
			exit 1
			;;
		esac
	done
}

# write_rsh HOME: DIR/rsh, ssh's stand-in (see the header).
write_rsh() {
	local shell
	shell=$(getent passwd "$(id -un)" | cut -d: -f7)
	[ -x "$shell" ] || shell=/bin/sh
	cat >"$dir/rsh" <<-EOF
	#!/bin/sh
	# rsh [SSH OPTIONS] [--] HOST CMD...: CMD on HOST (h<i> or 10.77.0.<i>) of
	# the namespace cluster in $dir, as an ssh session would run it there:
	# SHELL -c "CMD...", in the host's network, UTS and mount namespaces and its
	# home directory, with a login's environment only (and the variables the
	# cluster's sshd accepts), stdin, stdout and stderr passed through.  ssh's
	# options are ignored.  Exits 255 when HOST is not one of the cluster's.
	while [ \$# -gt 0 ]; do
		case \$1 in
		--) shift; break ;;
		-[BbcDEeFIiJLlmOopQRSWw]) [ \$# -ge 2 ] || break; shift 2 ;;
		-*) shift ;;
		*) break ;;
		esac
	done
	host=\${1-}
	case \$host in
	h[1-9]*) i=\${host#h} ;;
	10.77.0.[1-9]*) i=\${host#10.77.0.} ;;
	*) i=x ;;
	esac
	pid=
	case \$i in *[!0-9]*) ;; *) read -r pid 2>/dev/null <"$dir/host.\$i.pid" ;; esac
	[ -n "\$pid" ] || { echo "rsh: \$host: no such host in $dir" >&2; exit 255; }
	shift
	exec env -i HOME='$home' USER='$(id -un)' LOGNAME='$(id -un)' SHELL='$shell' \\
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
		\${ASAN_OPTIONS+"ASAN_OPTIONS=\$ASAN_OPTIONS"} \${UBSAN_OPTIONS+"UBSAN_OPTIONS=\$UBSAN_OPTIONS"} \\
		\${LSAN_OPTIONS+"LSAN_OPTIONS=\$LSAN_OPTIONS"} \${HERD_LOG+"HERD_LOG=\$HERD_LOG"} \\
		nsenter -t "\$pid" -n -u -m --wdns='$home' -- '$shell' -c "\$*"
	EOF
	chmod +x "$dir/rsh"
}

# The switch's end of host $1's link.
switch_port() {
	ip -n "$(switch_of)" -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 |
		grep -E "^hv$1(-$(cat "$dir/id"))?$" | head -1
}

# fault CMD I [ARG]: see the header.
fault() {
	local i=$2 arg=${3:-} ns port pid
	[ -f "$dir/id" ] || { echo "netns.sh: no cluster in $dir" >&2; exit 1; }
	ns=$(ns_of "$i")
	ip netns list | grep -q "^$ns\b" || { echo "netns.sh: no host $i in $dir" >&2; exit 1; }
	case $1 in
	cut) ip -n "$ns" link set eth0 down ;;
	mend) ip -n "$ns" link set eth0 up ;;
	shape)
		[[ $arg =~ ^[0-9]+[kmg]?bit$ ]] || { echo "netns.sh: shape: RATE like 100mbit, not '$arg'" >&2; exit 2; }
		port=$(switch_port "$i")
		tc -n "$ns" qdisc replace dev eth0 root tbf rate "$arg" burst 256kb latency 50ms
		tc -n "$(switch_of)" qdisc replace dev "$port" root tbf rate "$arg" burst 256kb latency 50ms
		;;
	loss)
		[[ $arg =~ ^[0-9]+$ ]] && [ "$arg" -le 100 ] || { echo "netns.sh: loss: a percentage, not '$arg'" >&2; exit 2; }
		ip netns exec "$ns" nft -f - <<-EOF
		table inet herd_loss {
			chain in { type filter hook input priority 0; iifname "eth0" numgen random mod 100 < $arg counter drop; }
			chain out { type filter hook output priority 0; oifname "eth0" numgen random mod 100 < $arg counter drop; }
		}
		EOF
		;;
	delay)
		[[ $arg =~ ^[0-9]+$ ]] || { echo "netns.sh: delay: milliseconds, not '$arg'" >&2; exit 2; }
		ip netns exec "$ns" python3 "$(dirname "$0")/delay_relay.py" $RELAY_PORT "$arg" $RELAY_MARK \
			</dev/null >"$dir/relay.$i.log" 2>&1 &
		echo $! >"$dir/relay.$i.pid"
		# Listening before any connection is sent to it (bounded: 10 s).
		for _ in $(seq 100); do
			ip netns exec "$ns" ss -Hltn "sport = :$RELAY_PORT" | grep -q . && break
			kill -0 "$(cat "$dir/relay.$i.pid")" 2>/dev/null || break
			sleep 0.1
		done
		ip netns exec "$ns" ss -Hltn "sport = :$RELAY_PORT" | grep -q . ||
			{ echo "netns.sh: the delay relay did not start: $(cat "$dir/relay.$i.log")" >&2; exit 1; }
		ip netns exec "$ns" nft -f - <<-EOF
		table ip herd_delay {
			chain pre { type nat hook prerouting priority dstnat; iifname "eth0" tcp dport != 22 counter redirect to :$RELAY_PORT; }
			chain out { type nat hook output priority -100; oifname "eth0" meta mark != $RELAY_MARK tcp dport != 22 counter redirect to :$RELAY_PORT; }
		}
		EOF
		;;
	clear)
		ip netns exec "$ns" nft delete table inet herd_loss 2>/dev/null || true
		ip netns exec "$ns" nft delete table ip herd_delay 2>/dev/null || true
		if [ -f "$dir/relay.$i.pid" ]; then
			pid=$(cat "$dir/relay.$i.pid")
			grep -q delay_relay "/proc/$pid/cmdline" 2>/dev/null && kill "$pid" 2>/dev/null
			rm -f "$dir/relay.$i.pid"
		fi
		tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
		port=$(switch_port "$i")
		[ -n "$port" ] && { tc -n "$(switch_of)" qdisc del dev "$port" root 2>/dev/null || true; }
		ip -n "$ns" link set eth0 up
		;;
	esac
}

case $cmd in
start) start ;;
cut | mend | shape | loss | delay | clear)
	[ $# -ge 3 ] || usage
	dir=$(cd "$dir" && pwd)
	fault "$cmd" "$3" "${4:-}"
	;;
stop) [ -d "$dir" ] && dir=$(cd "$dir" && pwd); stop ;;
*) usage ;;
esac
