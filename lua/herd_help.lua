-- herd.help: the reference of the Lua API, one entry per function, type
-- and field.  help(herd.launch), herd.help("launch"), help("Job:wait"),
-- help(job.wait) print an entry; help() lists them.  docs/lua.md is this
-- text rendered by herd.help.markdown() (a test keeps the two the same).

local M = {}

local source = [==[
# The herd module

The `herd` program runs Lua 5.4 with the `herd` table loaded. Conventions of every binding, as Lua's
own `io` library: misuse (a wrong type, an unknown option key, a closed object, a dtype mismatch, a
buffer too small) raises an error with herd's message; an expected failure (a host unreachable, a
timeout, a dead peer, a missing file, a file that cannot be written, a peer's value that will not
decode) returns `nil`, the message, and the status name (`"HERD_ETIMEDOUT"`), from the C bindings
and the Lua modules (`herd.experiment`, `herd.plot`) alike. Every object closes with `obj:close()`, at the end of a `local x <close>`
block, or when collected. Indices: Lua arrays count from 1; ranks count from 0 (as `HERD_RANK` and
MPI); GPU and NIC indices count from 0 (as nvidia-smi, `CUDA_VISIBLE_DEVICES` and the `GPU0`
labels): `node.gpus[1]` is GPU 0, and values in rank order are arrays whose element 1 is rank 0's.
At the prompt, `help(f)` or `herd.help("name")` prints an entry, objects print their fields, and
Tab completes globals, fields and, after a colon, methods.

## herd.version() -> string
The library's version, such as `"0.1.0"`.

## herd.help([what])
Prints the entry of `what`: a function of the API (`help(herd.launch)`), or a name (`"launch"`,
`"herd.Job"`, `"Job:wait"`). With no argument, lists every entry. `help` is also a global. The
text is wrapped to the terminal's width (`herd.columns()`).

## obj:close() -> true
Every herd object (`herd.Cluster`, `herd.Job`, `herd.Comm`, `herd.Buffer`, ...) closes with
`obj:close()`, once (a second close raises); a `local obj <close>` closes it at the end of its block,
and the collector closes what a script dropped. A closed object raises when used. A method or
metamethod given a value of another type names what it got: `herd.Buffer expected, got table`
(a table, even one given a herd type's metatable), `got herd.Store` (another herd object). In herd,
`os.exit([code])` closes the Lua state before the process ends, as `os.exit(code, true)` does in
`lua`, so that every object is closed then too (a checkpoint finishes its save in flight).

## herd.clock() -> seconds
A monotonic clock in seconds (a float, nanosecond resolution), for timing: `local t0 =
herd.clock(); ...; print(herd.clock() - t0)`.

## herd.write_file(path, text) -> true | nil, msg, status
Writes `text` to `path` as a new file: a temporary file beside it, renamed over it, so a reader
sees the old file or the whole new one. A device, a FIFO or a symbolic link at `path` is refused,
never written into. What herd's Lua modules write goes through it, so a file that cannot be
written fails alike everywhere: `nil`, a message naming the path, and `"HERD_EINVAL"` (what is
there), `"HERD_ENOTFOUND"` (no such directory) or `"HERD_EIO"`.

## herd.tty([fd]) -> boolean
Whether file descriptor `fd` (default 1, stdout) is a terminal.

## herd.columns([fd]) -> integer
The width in columns of the terminal on file descriptor `fd` (default 1, stdout): its window's
size when `fd` is a terminal, else `$COLUMNS` when that is a positive number (output piped into a
pager), else 80.

## herd.rank, herd.size, herd.local_rank, herd.host
This process's place in its job: rank, number of ranks, rank on its node, host name; from herd
launch's variables (`HERD_RANK`...), else torchrun's, Slurm's or Open MPI's; rank 0 of 1 outside
a job. `herd launch -n 4 script.lua` runs the script on every rank with these set.

# Discovery

## herd.discover([opts]) -> herd.Cluster | nil, msg, status
This node as probed now (CPUs, NUMA, memory, GPUs, NICs, RDMA); with `opts.inventory = path`
the inventory file `path` (JSON, msgpack or text); with `opts.hosts` (a hostlist),
`opts.hostfile` or `opts.slurm = true` those nodes, each running `herd probe` (over ssh, or in
one srun step) within `opts.timeout` seconds (default 30): the nodes that answered, and in
`c.failed` the others with their reasons (as `herd discover --hosts`). An unknown option raises,
so that a misspelt key does not probe this node instead of loading a file.

## herd.Cluster
A discovered cluster. `c.nodes` is the array of its `herd.Node`s (the same objects on every
access); `c.failed` the nodes a discovery could not inventory, `{host = ..., reason = ...}` each.
Prints its node count.

## herd.Cluster:json() -> string
The inventory as JSON text (docs/inventory.md).

## herd.Cluster:encode([format]) -> string
The inventory as bytes: `"msgpack"` (default), `"json"` or `"text"` (what `herd probe --text`
prints).

## herd.Cluster:warnings() -> {{nodes = hostlist, message = string}, ...}
Differences between the nodes that break or slow training (`herd discover` prints them as
warnings): GPU model or count, GPU driver, CUDA and NCCL versions, NIC speed or MTU, RDMA on some nodes only, ECC off, a
GPU on a narrower PCIe link than its siblings; each names the nodes that differ from the most
common value. Empty for one node.

## herd.Cluster:save(path[, format]) -> true | nil, msg, status
Writes the inventory to `path`, in the format its name says (`.json`, `.msgpack`, `.mpk`) or
`format`.

## herd.Node
A node of a cluster. Its fields are the keys of its object in the JSON inventory, with the same
values (docs/inventory.md): `hostname`, `cpu_model`, `packages`, `cores`, `threads`,
`memory_bytes`, `memory_available_bytes`, `numa`, `gpus` (each with `uuid`, `name`, `pci =
{bus_id, host_bridge, numa_node, switches}`, `memory_bytes`, `cc_major`, `cc_minor`,
`nvswitch_links`, `nvlinks`, `ecc`, `pcie_gen`, `pcie_width`, `pcie_max_gen`, `pcie_max_width`,
and `index`, its GPU index from 0), `gpu_note`, `netdevs`, `rdma`, `rdma_note`, `gpu_driver`,
`cuda_driver`, `nccl`; -1 stands for unknown, a field that is null is absent. Also `index` (its place in
`c.nodes`, from 1) and `matrix_nics` (the NICs of the topology matrix, in `nic_link`'s order).
Each access returns a fresh copy. A node keeps its cluster alive; once the cluster is closed,
using the node raises.

## herd.Node:link(i, j) -> string
The topology matrix code between GPU `i` and GPU `j` (GPU indices, from 0): `"X"`, `"NV18"`,
`"PIX"`, `"PXB"`, `"PHB"`, `"NODE"`, `"SYS"`, as `nvidia-smi topo -m` writes them.

## herd.Node:nic_link(gpu, nic) -> string
The matrix code between GPU `gpu` and NIC `nic` of `node.matrix_nics` (both from 0).

## herd.hostlist.expand(expr) -> names | nil, msg, status
Slurm's hostlist expression as an array of names: `"node[01-03],login"` gives `{"node01",
"node02", "node03", "login"}`. A malformed expression returns its column in the message.

## herd.hostlist.compress(names) -> string | nil, msg, status
The hostlist expression of an array of names, as `scontrol show hostlist` writes it, order kept:
`{"n1", "n2", "n4"}` gives `"n[1-2,4]"`.

# GPU allocation and health

## herd.alloc{...} -> herd.Plan | nil, msg, status
Plans GPUs for this node and, unless `hold = false`, takes their leases. Options: `gpus`,
`per_node`, `nodes`, `gpus_per_rank`; `link` (`"any"`, `"same-node"`, `"nvlink"`, `"same-numa"`);
`min_memory` (bytes or `"40G"`); `near_nic`, `shared`; `policy` (`"pack"`, `"spread"`); `exclude`,
`include` (GPU UUIDs, PCI bus ids or host names); `inventory`, `lease_dir`, `job`, `wait_ms`,
`hold`, `slurm` (default true: honour a Slurm allocation's grant).

## herd.Plan
A GPU plan. Fields: `ranks` (`rank`, `host`, `node`, `node_rank`, `local_rank`, `gpu` (its GPU
index), `uuid`, `pci_bus_id`, `gpus`, `numa`, `cpus`, `nic`, `nic_link`, `ib_hca`,
`socket_ifname`), `gpus` (`rank`, `host`, `node`, `index`, `uuid`, `pci_bus_id`, `numa`), `links`
(`links[i][j]` between `p.gpus[i]` and `p.gpus[j]`), `score`, `held`, `nodes`, `warnings`.
Closing it lets its leases go.

## herd.Plan:explain() -> string
Why the plan is what it is, as lines of text.

## herd.Plan:env(i) -> table
The environment of `p.ranks[i]` (`CUDA_VISIBLE_DEVICES` and the rest) as a table of strings.

## herd.Plan:link(i, j) -> string
The matrix code between the plan's GPUs `p.gpus[i]` and `p.gpus[j]`.

## herd.gpus([{inventory =, lease_dir =}]) -> array | nil, msg, status
The GPUs of this node and their leases: `index`, `uuid`, `pci_bus_id`, `numa`, `state`
(`"free"`, `"shared"`, `"exclusive"`, `"unknown"`), and as far as known `job`, `pid`, `user`,
`host`, `since`, `note`, `processes`, `free_memory_bytes`.

## herd.health([{level =, seconds =}]) -> report | nil, msg, status
The checks of `herd health` per GPU: `r.level`, `r.note` (why no GPU was checked), `r.gpus[i] =
{index, name, bus_id, uuid, result, checks = {{name, result, value, unit, detail}, ...}}`; results
are `"pass"`, `"warn"`, `"fail"` or `"skip"`. Level 2 adds the copy bandwidth and a cuBLAS burn of
`seconds`.

# Telemetry

## herd.telemetry.sample() -> sample | nil, msg, status
One sample of this node, taken now, as a table with the fields of the C struct
(`herd_telemetry_sample`, docs/telemetry.md) under their C names: `seq`, `time_ms` (Unix
milliseconds), `period_ms`, `host`, `cpu_busy` and `cpu_core` (percent busy, the node and each
CPU), `load1`, `mem_total`, `mem_available` (bytes), `gpus` (each `{index, uuid, bus_id, name,
util_gpu, util_mem, mem_used, mem_total, power_w, power_limit_w, energy_mj, temp_c,
sm_clock_mhz, mem_clock_mhz, throttle, ecc_sbe, ecc_dbe, xid, xid_count, pcie_tx_bps,
pcie_rx_bps, nvlink_tx_bps, nvlink_rx_bps}`), `gpu_note` (why there are no GPUs), `procs` (the
processes on the GPUs: `{gpu, pid, mem_used, job, rank, comm}`, where `gpu` is the place of its
GPU in `gpus` from 0: `s.gpus[p.gpu + 1]`), `nets` (`{name, rx_bytes, tx_bytes, rx_bps,
tx_bps}`), `disks` (`{name, read_bytes, write_bytes, read_bps, write_bps, util}`) and `dropped`.
The arrays hold their items (`#s.gpus` GPUs). A figure the source does not give is -1, as in C.
Rates are over the time since the previous call (the Lua state keeps a sampler for them): -1 on
the first call.

## herd.telemetry.sampler([{period =, ring =}]) -> herd.Telemetry | nil, msg, status
A sampler of this node on a thread of its own: a sample at once, then one every `period`
milliseconds (default 1000, at least 10), the last `ring` of them kept (default 300). An unknown
option raises.

## herd.Telemetry
A running sampler of this node. Closing it (or its collection) stops its thread. Prints its
period, ring and the last sample `next` gave.

## herd.Telemetry:next([seconds]) -> sample | nil
The oldest kept sample newer than the one `next` last gave (a table, as
`herd.telemetry.sample()`), its rates over the period before it; `nil` when none comes within
`seconds` (default 0: none waits now). A reader that fell more than `ring` samples behind gets the
oldest still kept: the jump in `seq` says how many it missed.

## herd.Telemetry:latest() -> sample | nil
The newest sample, whatever `next` gave; `nil` before the first.

## herd.Telemetry:samples() -> iterator
`for s in t:samples() do ... end`: the samples that wait now, oldest first, as `next` gives them.

## herd.Telemetry:fd() -> integer
A descriptor readable while a sample newer than the last `next` gave waits, for an event loop
to poll (not to read or close).

## herd.telemetry.watch([{hosts =, hostfile =, slurm =, period =}]) -> herd.TelemetryWatch | nil, msg, status
The samples of many nodes as they come, as `herd top --hosts` reads them: `hosts` (a hostlist,
over ssh) | `hostfile` | `slurm = true` (the nodes of this Slurm allocation), each node running
`herd probe --watch`; none of them: this node. A sample every `period` milliseconds (default
1000, at least 100). A node that cannot be reached is no failure of the call: `w:nodes()` says
so.

## herd.TelemetryWatch
A watch of nodes. Closing it (or its collection) stops every node's `herd probe --watch`
(their stdin closed; those still there 2 s later ended).

## herd.TelemetryWatch:next([seconds]) -> sample, node | nil
The oldest sample that came, from any node, as a table (`host` is the node's name as reached),
and the node's place in `w:nodes()` (from 1); `nil` when none comes within `seconds` (default
0: none waits now), or once every node has failed.

## herd.TelemetryWatch:samples() -> iterator
`for s, node in w:samples() do ... end`: the samples that wait now.

## herd.TelemetryWatch:nodes() -> array
Each node as `{host, state, why, samples, lost, last_ms}`: `state` is `"starting"`,
`"streaming"`, or how it failed (`"unreachable"`, `"not started"`, `"stalled"`, `"ended"`, `"bad
record"`) with the reason in `why`; `samples` received, `lost` (gaps in `seq` and samples
dropped from a full queue), `last_ms` the time of its last sample (0: none yet).

## herd.TelemetryWatch:live() -> integer
The nodes starting or streaming: 0 once every node has failed.

## herd.TelemetryWatch:fd() -> integer
A descriptor readable while a sample waits or a node's state changed, to poll.

# Jobs

## herd.launch{...} -> herd.Job | nil, msg, status
Starts a job as `herd launch` does and returns once every rank started. Options, with herd
launch's meaning and defaults: `cmd` (an array: program and arguments, or one string; a first
element ending in `.lua` runs as Lua ranks under this herd program), `n` (required; `np` too,
not both), `per_node`, `hosts` (a hostlist, over ssh) | `hostfile` | `slurm = true`,
`min_nodes` and `max_nodes` (an elastic job, as `--nodes MIN-MAX`: `per_node` ranks on each node
in, default 1, and no `n`; `min_nodes` defaults to `max_nodes`),
`exclude` (a hostlist of nodes to leave out, as `--exclude`; those of `herd exclude` always are),
`health_check` (1 or 2: every node runs `herd health` at that level first, as `--health-check`),
`ckpt_peers` (K copies of each rank's checkpoint data in other nodes' memory, as `--ckpt-peers`),
`gpus_per_rank`, `restarts`, `time` (the job's time limit as `--time`: srun's `"MM"`, `"MM:SS"`,
`"HH:MM:SS"`, `"D-HH[:MM[:SS]]"`, or a whole number of minutes) or `timeout` (the same limit in
seconds, as `--timeout`; at the limit the ranks are stopped and the state is `"time_limit"`,
status 124; restarts do not reset it), `start_timeout` (seconds for every rank to start, 60),
`grace` (seconds from SIGTERM to SIGKILL, 5), `env` (`{NAME = value}` or `{"NAME=value"}`),
`log_dir`, `prefix`, `workdir`; `output`:
`"print"` (default: every line to stdout or stderr with its `[host:rank] ` prefix), `"lines"`
(kept for `job:lines()`, up to 16 MiB) or `"none"`; `detach = true` keeps the job running when
Ctrl-C interrupts the session; `monitor = true` samples the ranks on this node as `herd launch
--monitor` does (`monitor_period`: seconds between samples, default 1) and prints its summary on
stderr when the script sees the job end, and `monitor_out = DIR` also writes the files of
`--monitor-out DIR`. The job is recorded in the accounting log (`herd acct`) when the script sees
it end (`wait`, `status`, `stop`, `lines`, or its close), that moment taken as its end.

## herd.Job
A running or finished job. Closing it, or its collection, stops its ranks (SIGTERM, then SIGKILL
after the grace period): a script cannot leak processes. Ctrl-C interrupts the jobs the session
started, except those launched with `detach = true`, as it does `herd launch`'s: SIGINT to
their ranks, SIGKILL after the grace period, state `"interrupted"`, status 130.

## herd.Job:wait([seconds]) -> result | nil, msg, status
Waits until the job is over (no argument: for as long as it takes) and returns its result:
`status` (0, else the first failed rank's exit code, 128 + signal, 126 or 127 when it could not start,
124 at the time limit, 130 when interrupted), `ok`, `state` (`"succeeded"`, `"failed"`,
`"time_limit"`, `"interrupted"`, `"stopped"`), `id`, `restarts`, `failure` (the first failure: host,
rank, how it ended, the last lines of its stderr; or how else the job ended, as `"time limit of
0:05 reached; ranks 0-3 stopped"`) and `ranks` (by rank, element 1 is rank 0:
`rank`, `host`, `node_rank`, `local_rank`, `pid`, `state`, `exit_code` or `signal`, `error`)
of the current (or last) run, and `nodes` (every node of the job: `host`, `role` `"in"`,
`"spare"` or `"out"`, `node_rank` when in, `why` when out).
Still running at the deadline: `nil`, a message, `"HERD_ETIMEDOUT"`.

## herd.Job:status() -> result
The same table at once; `state` is `"running"` while it runs, with no `status`.

## herd.Job:signal(sig) -> true
Sends a signal (`"USR1"`, `"SIGTERM"`, or a number) to every running rank. `HUP`, `INT`,
`QUIT`, `TERM` and `KILL` also end the job: no restart follows them.

## herd.Job:stop([grace]) -> result
Stops the job: SIGTERM, then SIGKILL after `grace` seconds (default the launch's); no more
restarts. Returns the result.

## herd.Job:lines([seconds]) -> iterator
For a job launched with `output = "lines"`: `for l in job:lines() do ... end` gives each line as
`{rank =, host =, stream = "stdout" | "stderr", text =}` as it comes, until the job is over and
every line was read, or `seconds` passed.

## herd.Job:dropped() -> integer
Lines that `output = "lines"` dropped because more than 16 MiB waited to be read.

## herd.Job:results() -> array
What each rank last passed to `herd.emit`, by rank (element 1 is rank 0's; nil for none).

## herd.Job:id() -> string
The job id, also `HERD_JOB_ID` of every rank.

## herd.Job:size() -> integer
The number of ranks.

## herd.emit(value)
On a rank of a job launched from Lua, hands `value` (any msgpack value, up to 32 KiB encoded) to
the launching script's `job:results()`; elsewhere (under `herd launch`, or alone) prints it.

## herd.jobs.list() -> {status, ...} | nil, msg, status
This user's running jobs on this node, whoever launched them (`herd launch`, a script, a C
program), as `herd jobs` lists them: each a table of `id`, `pid` (the launcher's), `command`,
`hosts`, `nodes`, `ranks`, `state` (`"starting"`, `"running"`, `"failing"`, `"stopping"`),
`restarts`, `started` and `age` (seconds), and `rank_states` (`{rank, host, pid, state}` each);
a service's (`kind = "service"`) as `herd.Service:status()`.

## herd.jobs.status(id) -> status | nil, msg, status
One running job's table, as in `herd.jobs.list()`; `nil, msg, "HERD_ENOTFOUND"` when no job
`id` of this user runs here.

## herd.jobs.stop(id) -> true | nil, msg, status
Stops job `id` as Ctrl-C on its launcher would (`herd job stop ID`): it ends as interrupted.

## herd.serve{...} -> herd.Service | nil, msg, status
Starts a service as `herd serve` does: replicas of `cmd` behind HAProxy, the front door on
`bind`:`port`. Returns once HAProxy and the first replicas' launches started. Options, with herd
serve's meaning and defaults: `cmd` (an array or one string), `port` (required), `bind`
(`"127.0.0.1"`), `replicas` (a count) or `min_replicas` and `max_replicas` (a range, starting at
the minimum), `target` (requests in flight per replica that scaling aims at; 0: none),
`cooldown` (seconds, 30), `replica_port` (replica i listens on it + i; default `port` + 1),
`replica_conns`, `health` (`"/path"` or `"tcp"`), `start_timeout` (seconds, 60), `grace`
(seconds, 10), `restarts` (each replica's, 3), `hosts` | `hostfile` | `slurm = true`,
`gpus_per_replica`, `env`, `prefix` (`"[%h:r%r] "`), `output` (`"print"` or `"none"`) and
`events` (`"print"`: each decision on stderr; `"none"`: only in `status().events`). The
front door's port taken: `nil, msg, "HERD_EBUSY"`; HAProxy missing or older than 2.0:
`"HERD_EUNAVAIL"`.

## herd.Service
A running service. Closing it, or its collection, drains and stops its replicas and HAProxy.

## herd.Service:status() -> table
`id`, `kind` (`"service"`), `state` (`"starting"`, `"serving"`, `"stopping"`, `"stopped"`,
`"failed"`), `front`, `wanted`, `min_replicas`, `max_replicas`, `target`, `in_flight`, `queued`,
`restarts`, `replicas` (each `index`, `host`, `port`, `state` (`"starting"`, `"ready"`,
`"draining"`, `"stopping"`, `"backoff"`, `"down"`, `"off"`), `pid`, `restarts`, `requests`,
`errors`, `in_flight`, `why`) and `events` (the last 32 decisions).

## herd.Service:wait_ready(n [, seconds]) -> true | nil, msg, status
Waits until `n` replicas are in the balancer; `"HERD_ETIMEDOUT"` at the deadline,
`"HERD_ECLOSED"` when the service ended.

## herd.Service:scale(n) -> true | nil, msg, status
Sets the replicas wanted, within `min_replicas`..`max_replicas` (else `"HERD_EINVAL"`).

## herd.Service:restart([{rolling = true}]) -> true | nil, msg, status
Restarts every replica, one at a time with `rolling` (each drained, stopped, started and back
in the balancer before the next); `"HERD_EBUSY"` while a restart is under way.

## herd.Service:stop() -> true
Drains and stops every replica, then HAProxy; returns once all are gone.

## herd.Service:wait([seconds]) -> true, failed | nil, msg, status
Waits until the service is over; `failed` when every replica went down for good.

## herd.Service:id() -> string
The service's id, as `herd jobs` lists it.

## herd.Service:failure() -> string | nil
Why the service failed.

# Rendezvous store

## herd.store.serve([{host =, port =, secret =}]) -> herd.StoreServer | nil, msg, status
Starts a store server in this process: on `host` (default `"127.0.0.1"`; `"0.0.0.0"` for other
nodes), `port` (default a free one), with `secret` (default `HERD_JOB_SECRET`, else a fresh one).

## herd.StoreServer
A store server. `srv.secret` is its secret; it stops when closed.

## herd.StoreServer:address() -> string
`"host:port"`, as `herd.store.connect` takes it.

## herd.StoreServer:port() -> integer
The port it listens on.

## herd.store.connect([address[, secret[, {timeout =, connect_timeout =}]]]) -> herd.Store | nil, msg, status
Connects to a store server and proves, both ways, that both hold the secret. `address` defaults
to `HERD_STORE`, `secret` to `HERD_JOB_SECRET`; `timeout` (seconds, default 300) is every call's
deadline and `connect_timeout` how long to keep trying.

## herd.store.env() -> herd.Store | nil, msg, status
The job's own store, from `HERD_STORE` and `HERD_JOB_SECRET`.

## herd.Store
A connection to a store. A value is bytes, so that C programs read what a script writes.

## herd.Store:set(key, value) -> true
Sets `key`: a string as it is, any other value (number, boolean, table) as its msgpack encoding.

## herd.Store:get(key[, seconds]) -> string | nil, msg, status
The bytes of `key`, waiting until it exists (default the handle's deadline).

## herd.Store:get_value(key[, seconds]) -> value | nil, msg, status
The Lua value that `set` stored (msgpack decoded); raises when the bytes are not msgpack.

## herd.Store:add(key[, delta]) -> integer
Adds `delta` (default 1) to the counter at `key` atomically and returns the new value; a
counter's bytes are its decimal text.

## herd.Store:delete(key) -> boolean
Deletes `key`; whether it existed.

## herd.Store:wait(keys[, seconds]) -> true | nil, msg, status
Waits until every key (a string or an array) exists; the message names those still missing.

## herd.Store:keys([prefix]) -> array | nil, msg, status
The keys that start with `prefix` (default: every key), in byte order, as this handle names them;
more than 4096 return `nil`, a message and `"HERD_ENORESOURCE"`.

## herd.Store:prefix(p) -> herd.Store
A handle whose keys are prefixed with `p`, on the same connection.

## herd.msgpack.pack(value) -> string
The msgpack encoding of a Lua value (nil, booleans, integers, floats, strings, tables: an array
when its keys are exactly 1..n, else a map); functions, userdata and cycles raise.

## herd.msgpack.unpack(bytes) -> value
The value of exactly one msgpack value; raises otherwise.

## herd.json.encode(value[, {indent =, sort =}]) -> string
JSON text of a Lua value (tables as arrays or objects, as msgpack does; `herd.json.null` is
null).

## herd.json.decode(text) -> value | nil, msg, status
The value of JSON text; null fields are absent and null array elements are `herd.json.null`.

# Buffers and collectives

## herd.buffer(dtype, n) -> herd.Buffer
`n` zeroed elements of `dtype`: `int8`, `uint8`, `int32`, `uint32`, `int64`, `uint64`,
`float16`, `bfloat16`, `float32`, `float64`, `float8_e4m3`, `float8_e5m2` (also `"float"`,
`"half"`, `"bf16"`, `"double"`, `"float8_e4m3fn"`, `"e5m2"`...). Storing into an 8-bit float
rounds to nearest even and saturates at its largest finite value (448, 57344).

## herd.buffer.from(dtype, values) -> herd.Buffer
A buffer holding the numbers of the array `values`.

## herd.Buffer
Typed host memory. `b[i]` (from 1) reads and writes an element (integer dtypes as integers,
floating ones as floats; a value that does not fit raises); `#b` is its length, `b.dtype` and
`b.bytes` its type and size. Collectives and checkpoints work on its memory directly. Views share
it; the memory lives until the last buffer, view or operation on it is done. `tostring(b)`, `print`
and the prompt show its dtype, length and first 8 values, as a tensor's repr: `herd.Buffer(float32,
1048576) {1, 2, 3, 4, 5, 6, 7, 8, ...}`; a float in the fewest digits that read back as the same
value of the dtype (a float32 0.1 shows as `0.1`, a float16 65504 as `65500`).

## herd.Buffer:fill(v) -> b
Sets every element to `v`.

## herd.Buffer:iota([start[, step]]) -> b
Element `i` becomes `start + (i - 1) * step` (defaults 0 and 1).

## herd.Buffer:sum() -> number
The sum (integers wrap as Lua's do). `b:min()` and `b:max()` give the extremes (nil when empty).

## herd.Buffer:min() -> number
The smallest element; nil for an empty buffer.

## herd.Buffer:max() -> number
The largest element; nil for an empty buffer.

## herd.Buffer:copy() -> herd.Buffer
A new buffer with the same dtype and contents.

## herd.Buffer:view(first[, n]) -> herd.Buffer
The `n` elements from element `first` (default: to the end), sharing this buffer's memory.

## herd.Buffer:totable() -> array
The elements as a Lua array.

## herd.Buffer:cast(dtype) -> herd.Buffer
A new buffer of another dtype; floats become integers by truncation toward zero, and a value out
of range raises.

## herd.comm([{...}]) -> herd.Comm | nil, msg, status
With no argument, the job's communicator, joined on first use from the environment (herd's,
torchrun's, Slurm's or Open MPI's variables) and the same object afterwards; a script that ends
normally finalizes it. `herd.comm{store =, rank =, size =}` joins a new one through a
`herd.Store`; `herd.comm{timeout =, transport =, algo =, socket_ifname =}` a new one from the
environment with those settings (`timeout` in seconds for every call; `transport` `"auto"` or
`"tcp"`; `algo` `"auto"`, `"ring"`, `"rd"` or `"hier"`).

## herd.Comm
A communicator. Every call is collective: all ranks make the same calls in the same order. A dead
peer, a deadline, a mismatch between ranks or an abort return `nil`, herd's message naming the
rank, and the status; the communicator is broken from then on. Reductions: `"sum"` (default),
`"prod"`, `"min"`, `"max"`, `"avg"`. Without an output buffer an operation is in place where that
has a meaning (allreduce, reduce, broadcast), else it returns a new buffer of the right size.

## herd.Comm:rank() -> integer
This rank, from 0.

## herd.Comm:size() -> integer
The number of ranks.

## herd.Comm:host([rank]) -> string
The host name of a rank (default this one).

## herd.Comm:barrier() -> true
Returns once every rank has entered it.

## herd.Comm:allreduce(buf[, out][, op]) -> buffer
Every rank gets the reduction of every rank's `buf`. `c:allreduce(3.5, "max")` and
`c:allreduce({1, 2, 3})` reduce numbers and arrays of numbers (int64 when all are integers,
else float64) and return the same shape.

## herd.Comm:reduce(buf[, out], op, root) -> buffer | true
The reduction lands on `root` (which gets the buffer; others get true). Numbers as for allreduce:
the root gets the value, the others nil.

## herd.Comm:broadcast(buf, root) -> buffer
Every rank's `buf` becomes the root's. `c:broadcast(value, root)` moves any msgpack value (the
others pass nil) and returns it.

## herd.Comm:allgather(buf[, out]) -> buffer
Every rank's `buf`, in rank order, on every rank (`size * #buf` elements).
`c:allgather(value)` gathers any msgpack value into an array by rank.

## herd.Comm:reduce_scatter(buf[, out][, op]) -> buffer
Block `rank` of the reduction of every rank's `buf` (`#buf / size` elements).

## herd.Comm:alltoall(buf[, out]) -> buffer
Block `j` of rank `i`'s `buf` lands in block `i` of rank `j`'s output.

## herd.Comm:gather(buf[, out], root) -> buffer | true
Every rank's `buf` on the root, in rank order.

## herd.Comm:scatter(buf, out, root) -> out
Block `rank` of the root's `buf` (nil elsewhere) into `out`.

## herd.Comm:send(buf or value, peer) -> true
Sends a buffer to rank `peer`, or any msgpack value for `c:recv(peer)`.

## herd.Comm:recv(buf or peer[, peer]) -> buffer | value
`c:recv(buf, peer)` fills `buf` from `peer`; `c:recv(peer)` returns the value `peer` sent.

## herd.Comm:split(color[, key]) -> herd.Comm | nil
The ranks of the same `color` in a new communicator, ordered by `key` (default the rank); nil for
a `color` of nil. The parent cannot be closed while such communicators are open.

## herd.Comm:grid{tp = T, pp = P, ...[, order = "tp-cp-ep-dp-pp"]} -> herd.Grid | nil, msg, status
Lays a grid of named dimensions on the ranks (C: `herd_comm_grid_create`), innermost first in
`order` (default Megatron's; a missing `dp` is what the rest makes), node by node and NVLink set by
set, and makes a communicator for this rank's group along each dimension. A grid that does not fit
the ranks, and grids that differ between ranks, return nil and the message on every rank. The
groups are `herd.Comm` objects split from `c`, which cannot be closed while they are open.

## herd.Grid
A grid laid on a communicator's ranks (`c:grid{...}`).

## herd.Grid:group(name) -> herd.Comm | nil, msg, status
This rank's group along the dimension `name`; its rank is the coordinate along it. Nil and the
message when the grid has no such dimension (a `dp` of 1 is not made up).

## herd.Grid:coords([rank]) -> table
A rank's coordinates (default this rank's), by dimension name: `{tp = 1, dp = 0, pp = 1}`.

## herd.Grid:ranks(name[, rank]) -> array
The ranks of a rank's group along `name` (default this rank's), by their coordinate.

## herd.Grid:dims() -> array
The dimensions, innermost first, as `{name = "tp", size = 4}`.

## herd.Grid:explain() -> string
Each dimension's groups with the worst link in each (`NV18`, `PIX`, `SYS`, `NET` between nodes,
`SHM` on a node whose GPUs are not known), each rank's coordinates, and a warning for a `tp` or
innermost group across nodes; the same text on every rank.

## herd.Comm:iallreduce(buf[, out][, op]) -> herd.Request
Starts an allreduce and returns at once; also `ireduce(buf[, out], op, root)`,
`ibroadcast(buf, root)`, `iallgather(buf[, out])`, `ireduce_scatter(buf[, out][, op])`,
`ialltoall(buf[, out])` and `ibarrier()`. The buffers' memory is held until the request is done.

## herd.Request
A nonblocking operation in flight; it runs in the order it was called with the blocking ones.

## herd.Request:wait() -> result | nil, msg, status
Waits for the operation (within the communicator's deadline) and returns what the blocking call
would (its output buffer, or true).

## herd.Request:test() -> false | result | nil, msg, status
False while the operation runs; then as `wait`.

## herd.Comm:finalize() -> true
Completes pending operations and leaves the ranks in step (a barrier), before closing. After it,
only `close`, `rank`, `size`, `host`, `error` and `abort` remain: a collective, `split` or a
second `finalize` raises `attempt to use a finalized herd.Comm`, as a call on a closed one raises
`attempt to use a closed herd.Comm`.

## herd.Comm:abort()
Makes every pending and later call, here and on the peers, fail at once.

## herd.Comm:error() -> nil | msg, status
Nil while the communicator works, else why it broke.

# Checkpoints

## herd.checkpoint(dir[, comm[, opts]]) -> herd.Checkpoint | nil, msg, status
A checkpoint directory; `comm` is nil (one process) or a `herd.Comm` whose ranks save together.
Options: `keep_last`, `keep_every`, `staging_bytes`, `chunk_bytes` (bytes or `"64M"`), `checksum`
(`"xxh3"` or `"none"`), `peer_copies` (copies of each rank's data in other nodes' memory, with the
holders of `herd launch --ckpt-peers`; -1: none) and `storage_every` (with them, only steps that
are its multiples also go to storage).

## herd.Checkpoint
Every rank calls add, save, restore and close in the same order.

## herd.Checkpoint:add(name, tensor[, {dtype =, shape =, global =, offset =}]) -> true
Registers a tensor: a `herd.Buffer` (saved from and restored into its own memory) or a Lua array
of numbers (copied in at save and back at a successful restore; dtype default float64). `shape`
defaults to `{#tensor}`; `global` and `offset` place this rank's shard in the global tensor.

## herd.Checkpoint:save(step) -> true | nil, msg, status
Saves every tensor as `step`, committed on every rank at once. A step of that number already
committed is verified: kept when it verifies (`nil, msg, "HERD_EEXIST"`), moved aside when it does
not (with a warning naming where), and the save goes on.

## herd.Checkpoint:save_async(step) -> true | nil, msg, status
Returns once the values are staged; the write goes on in the background. `ck:wait()` gives its
outcome. A save still in flight when the checkpoint is closed otherwise (a `<close>` variable,
the collector, the end of the script, `os.exit`, which closes the state in herd) is finished
first; if it fails, it is said on stderr, leaves no temporary step, and the program's exit status
is 1 instead of 0.

## herd.Checkpoint:wait() -> true | nil, msg, status
The outcome of the save in flight.

## herd.Checkpoint:restore([step]) -> step | nil, msg, status
Restores `step` (default the newest that verifies, falling back to older ones) into the tensors.
Newer steps passed over as damaged are then moved aside (renamed `step-N.damaged-TIME`, kept for
inspection, a warning naming each), so that their numbers can be saved again.

## herd.Checkpoint:rank() -> integer
This process's rank among the checkpoint's ranks; `ck:size()` their number, `ck:dir()` the
directory.

## herd.Checkpoint:size() -> integer
The number of ranks.

## herd.Checkpoint:dir() -> string
The directory.

## herd.Checkpoint:last_restore() -> table
What the last `restore` on this rank did: `tier` (`"storage"`, `"peers' memory"` or `"none"`),
`step`, `seconds`, `bytes` (fetched from peers' memory), `storage_step` and `peers_step` (the
newest step of each tier; -1: none), `why` (in words) and `from` (the hosts that sent data).

## herd.Checkpoint:stats() -> table
What the saves cost this rank, per tier: `peers` (saves to peers' memory only) and `storage`,
each `{saves, stall, stall_max, busy}` in seconds: the stall the caller saw (the staging copy and
waiting for a save to end) and each save's time from start to commit.

## herd.Checkpoint:close() -> true | nil, msg, status
Waits for a save in flight, returns its outcome, and frees the checkpoint.

# Experiments

## herd.bench(op[, opts]) -> records | nil, msg, status
Runs `herd bench op --json` (a child of this program) and returns its records: `op`, `ranks`,
`size`, `count`, `type`, `redop`, `root`, `out_of_place` and `in_place` (`time_us`,
`median_us` and `p99_us` per call, `algbw`, `busbw`, `wrong`). Options are herd bench's long
options: `minbytes`, `maxbytes` (or `size` for both), `stepfactor`, `stepbytes`, `iters`,
`warmup_iters`, `check`, `datatype`, `op`, `root`, `average`, `run_cycles`, `transport`, `algo`,
`timeout`; `n` the number of ranks (as `-n`; `np` too, not both).

## herd.experiment{params =, run =, repeats =, warmup =, order =, name =} -> herd.Experiment
Runs `run(p)` for every combination `p` of `params` (a table of arrays; names in `order`,
default sorted, the last varying fastest): `warmup` times (default 0, dropped), then `repeats`
times (default 3). `run` returns a table of numbers (metrics) or one number (`value`).

## herd.Experiment
`e.records[i]` holds `params`, every sample (`samples[metric]`) and `stats[metric]`: `n`, `min`,
`p5`, `median`, `mean`, `p95`, `max`, `stddev` (percentiles by nearest rank).

## herd.Experiment:table([{stats =, metrics =}]) -> string
An aligned text table: the parameters, then each metric's statistics (default median, min, max).

## herd.Experiment:csv([opts]) -> string
CSV with a header row, every statistic by default. A float is written in the fewest digits that
read back as the same double (`0.1`, `0.3333333333333333`, `1e-300`, `123456789.123`), an integer
in full.

## herd.Experiment:markdown([opts]) -> string
A Markdown table.

## herd.Experiment:json() -> string
Every sample and statistic as JSON.

## herd.Experiment:save(path) -> true | nil, msg, status
Writes JSON, or CSV or Markdown when `path` ends in `.csv` or `.md`.

## herd.experiment.load(path) -> herd.Experiment | nil, msg, status
Reads an experiment saved as JSON.

## herd.Experiment:series{x =, y =, series =, where =, stat =, band =} -> array
The series of a plot: statistic `stat` (default median) of metric `y` against parameter `x`, one
series per combination of values of the `series` parameter(s) (default: every parameter but
`x`), records filtered by `where`. A series is named by its values (`"tcp"`, `"auto, 2"`); each
point is `{x, y, lo, hi}`, `lo` to `hi` the spread of its samples: `band = "min-max"` (default),
`"p5-p95"`, or `false` for none (a point of one sample has none).

## herd.Experiment:plot{x =, y =, ...} -> string
A terminal line chart of `series{...}`, with `herd.plot.text`'s options: the axes titled by `x`
and `y` with their units (`xunit = "bytes"`: "size (bytes)"), the legend headed by the `series`
parameters' names, and a caption saying what the lines and bars show ("lines: median of 3 runs
per point; bars (|): min to max").

## herd.Experiment:svg{x =, y =, ..., path =} -> string | nil, msg, status
An SVG chart of `series{...}`, with `herd.plot.svg`'s options, titled, headed and captioned as
`plot` (the spread drawn as a shaded band); a `path` that cannot be written fails as `save` does.

## herd.plot.text(series[, opts]) -> string
A line chart for the terminal: `series` is `{{name =, points = {{x, y[, lo, hi]}, ...}}, ...}`; a
point's `lo` to `hi` is drawn as a bar of `|`. Options: `title`, `xlabel`, `ylabel`, `xunit`,
`yunit` (the axis title carries it: "size (bytes)"; `"bytes"` also writes ticks as 1K, 4M),
`logx`, `logy`, `xmin`, `xmax`, `ymin`, `ymax`, `legend` (the legend's heading), `caption` (a
line under the chart), `width` (default 80 columns), `height` (20 rows), `color` (default: stdout
is a terminal). One mark per series, dots between points, a legend of the series' names as words
(a number in its shortest form, a table as `herd.pretty.format` writes it).

## herd.plot.svg(series[, opts]) -> string | nil, msg, status
The same chart as SVG (axes, ticks, titles with units, grid, legend, caption, title), each point's
`lo` to `hi` drawn as a shaded band around its series' line (an error bar for a lone point);
`width`, `height` in pixels (800 x 500), `path` writes the file too (`herd.write_file`).

## herd.report.write(dir) -> paths | nil, msg, status
The plots and the page of a job report: reads `dir/summary.json` and `dir/series.json` (as `herd
launch --monitor-out DIR` writes them) and writes beside them `gpu_util.svg`, `gpu_memory.svg`,
`cpu.svg`, `power.svg` (through `herd.plot.svg`, a line per rank and GPU, at most 1000 points
each: the means of consecutive samples beyond) and `report.html`, one self-contained page (inline
CSS and SVG, no script, nothing fetched) with the summary table, the warnings and the plots.
Returns the paths written.

## herd.pretty.format(value[, opts]) -> string
Readable text of a value, tables as Lua constructors.

## herd.pretty.print(...)
Prints values as the prompt does: tables formatted, herd objects with their fields.

## herd.pretty.object(obj) -> string
A herd object's text and fields, one per line.
]==]

-- Entries: { key =, heading =, body =, section = }, in order.
local entries, by_key = {}, {}
local intro
do
  local section, cur
  for line in (source .. "\n"):gmatch("(.-)\n") do
    local h1 = line:match("^# (.*)$")
    local h2 = line:match("^## (.*)$")
    if h1 then
      section = { title = h1, entries = {} }
      entries[#entries + 1] = section
      cur = nil
    elseif h2 then
      local key = h2:match("^([%w_.:]+)")
      cur = { key = key, heading = h2, body = {}, section = section.title }
      table.insert(section.entries, cur)
      by_key[key] = cur
      for k in (h2 .. " "):gmatch("(herd%.[%w_.]+)[,%s]") do by_key[k] = by_key[k] or cur end
    elseif cur then
      table.insert(cur.body, line)
    elseif section and line ~= "" then
      intro = (intro and intro .. "\n" or "") .. line
    end
  end
end

local function find(name)
  if by_key[name] then return by_key[name] end
  for _, k in ipairs({ "herd." .. name, (name:gsub("^(%a)", string.upper)) }) do
    if by_key[k] then return by_key[k] end
    if by_key["herd." .. k] then return by_key["herd." .. k] end
  end
  -- "job:wait" and the like: a method of the type whose name starts so
  local t, m = name:match("^(%a[%w_]*)[:.]([%w_]+)$")
  if t then
    local key = "herd." .. t:sub(1, 1):upper() .. t:sub(2) .. ":" .. m
    if by_key[key] then return by_key[key] end
  end
  if name:match(":close$") then return by_key["obj:close"] end
  -- a method that another entry of its type describes (c:ireduce in iallreduce's)
  local ty, meth = name:match("^(herd%.%u[%w_]*):([%w_]+)$")
  if ty then
    for _, s in ipairs(entries) do
      for _, e in ipairs(s.entries) do
        if e.key:sub(1, #ty + 1) == ty .. ":" and table.concat(e.body, " "):find("`" .. meth .. "(", 1, true) then
          return e
        end
      end
    end
  end
  return nil
end

-- The name of an API function value: herd.X, herd.X.Y, or a method of a
-- herd type (read from the registry's metatables).
local function name_of(f)
  for k, v in pairs(herd) do
    if v == f then return "herd." .. k end
    if type(v) == "table" then
      for k2, v2 in pairs(v) do
        if v2 == f then return "herd." .. k .. "." .. k2 end
      end
    end
  end
  local reg = debug.getregistry()
  for tname, mt in pairs(reg) do
    if type(tname) == "string" and tname:match("^herd%.%u") and type(mt) == "table" then
      local idx = rawget(mt, "__index")
      local methods = type(idx) == "function" and select(2, debug.getupvalue(idx, 1))
      if type(methods) == "table" then
        for k, v in pairs(methods) do
          if v == f then return tname .. ":" .. k end
        end
      end
      for k, v in pairs(mt) do
        if v == f and type(k) == "string" then return tname .. ":" .. k end
      end
    end
  end
  return nil
end

-- The words of text broken into lines of at most width columns (a word
-- longer than that on a line of its own), the first line after lead and
-- the others after indent.
local function wrap(text, width, lead, indent)
  local lines, line = {}, lead
  local len = utf8.len or string.len
  local function cols(s) return len(s) or #s end
  for word in text:gmatch("%S+") do
    if line ~= lead and line ~= indent and cols(line) + 1 + cols(word) > width then
      lines[#lines + 1] = line
      line = indent
    end
    line = line .. ((line == lead or line == indent) and "" or " ") .. word
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

-- An entry: its heading (continued 4 columns in), then each paragraph of
-- its body re-flowed, or as written when width is nil.
local function render(e, width)
  if not width then
    return e.heading .. "\n" .. table.concat(e.body, "\n"):gsub("%s+$", "")
  end
  local out, para = { wrap(e.heading, width, "", "    ") }, {}
  for _, line in ipairs(e.body) do
    if line:match("^%s*$") then
      if #para > 0 then out[#out + 1] = wrap(table.concat(para, " "), width, "", "") end
      para = {}
    else
      para[#para + 1] = line
    end
  end
  if #para > 0 then out[#out + 1] = wrap(table.concat(para, " "), width, "", "") end
  return table.concat(out, "\n")
end

-- The text help prints for what, wrapped to width columns when given.
function M.text(what, width)
  if width ~= nil then
    assert(math.type(width) == "integer", "herd.help.text: width must be an integer")
    width = math.max(width, 20)
  end
  if what == nil then
    local out = { "herd's Lua API (help(name) for one entry):" }
    for _, s in ipairs(entries) do
      local keys = {}
      for _, e in ipairs(s.entries) do keys[#keys + 1] = e.key end
      local line = s.title .. ": " .. table.concat(keys, ", ")
      out[#out + 1] = width and wrap(line, width, "  ", "    ") or "  " .. line
    end
    return table.concat(out, "\n")
  end
  local name = what
  if type(what) == "function" then
    name = name_of(what)
    if not name then return nil, "no entry: this function is not part of herd's API" end
  elseif type(what) == "userdata" then
    local mt = getmetatable(what)
    name = type(mt) == "table" and rawget(mt, "__name")
  elseif type(what) == "table" then
    for k, v in pairs(herd) do if v == what then name = "herd." .. k end end
  end
  if type(name) ~= "string" then return nil, "no entry for a " .. type(what) .. " value" end
  local e = find(name)
  if not e then return nil, "no entry named '" .. name .. "' (help() lists them)" end
  return render(e, width)
end

-- Prints the entry of what (see the top of this file), wrapped to the
-- terminal's width (herd.columns()).
function M.help(what)
  local text, err = M.text(what, herd.columns())
  print(text or err)
end

-- docs/lua.md: the whole reference as Markdown.
function M.markdown()
  local out = { "# Lua reference", "",
                "This file is `herd.help.markdown()`: the text that `help()` prints at the `herd>`",
                "prompt. Examples: `examples/lua/`.", "", intro, "" }
  for _, s in ipairs(entries) do
    out[#out + 1] = "## " .. s.title
    out[#out + 1] = ""
    for _, e in ipairs(s.entries) do
      out[#out + 1] = "### `" .. e.heading .. "`"
      out[#out + 1] = ""
      local body = table.concat(e.body, "\n"):gsub("^%s+", ""):gsub("%s+$", "")
      if body ~= "" then
        out[#out + 1] = body
        out[#out + 1] = ""
      end
    end
  end
  return (table.concat(out, "\n"):gsub("\n+$", "\n"))
end

-- The names of every entry, in order.
function M.names()
  local out = {}
  for _, s in ipairs(entries) do
    for _, e in ipairs(s.entries) do out[#out + 1] = e.key end
  end
  return out
end

setmetatable(M, { __call = function(_, what) return M.help(what) end })
return M
