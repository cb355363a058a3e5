# tests/harness/sshd_lib.sh - what the harnesses that start OpenSSH servers
# (sshd.sh, netns.sh) share; sourced.

# sshd_options DIR PIDFILE: the options every test server runs with: DIR's
# host key and authorized keys, keys only, no PAM, room for many sessions
# at once, and the sanitizer and log variables a client may send.
sshd_options() {
	cat <<-EOF
	HostKey $1/host_ed25519
	PidFile $2
	AuthorizedKeysFile $1/authorized_keys
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
	AcceptEnv ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS HERD_LOG
	EOF
}

# ssh_options DIR: the client side (for `ssh -F`), under a "Host *" line
# the caller writes with anything of its own: DIR's key and known hosts
# only, no prompt, no shared connection, the variables the servers accept.
ssh_options() {
	cat <<-EOF
	    User $(id -un)
	    IdentityFile $1/id_ed25519
	    IdentitiesOnly yes
	    UserKnownHostsFile $1/known_hosts
	    GlobalKnownHostsFile /dev/null
	    StrictHostKeyChecking yes
	    BatchMode yes
	    ControlMaster no
	    ControlPath none
	    LogLevel ERROR
	    SendEnv ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS HERD_LOG
	EOF
}

# login_home NAME: the home directory of the user running, which the
# servers' sessions see replaced by a fresh one (a bind mount in sshd's own
# mount namespace): not this machine's shell start-up files, whose locks a
# stopped test could leave behind.  Exits 77 without one; NAME says who.
login_home() {
	local home
	home=$(getent passwd "$(id -un)" | cut -d: -f6)
	[ -d "$home" ] || { echo "$1: no home directory for $(id -un)" >&2; exit 77; }
	echo "$home"
}
