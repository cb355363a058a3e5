/*
 * sdk/comm/env.c - the communicator's options and identity from the
 * environment: the one place where the communicator's settings (HERD_TIMEOUT,
 * HERD_TRANSPORT, HERD_ALGO, HERD_SOCKET_IFNAME, HERD_SOCKET_STREAMS,
 * HERD_NET_LINK, HERD_DEVICE_CHECK: sdk/base/param.h) override defaults, and
 * herd_comm_init_env, which finds the rank, the world size and the store from
 * herd's, torchrun's, Slurm's or Open MPI's variables.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "bootstrap.h"
#include "comm/core.h"
#include "topo/hostlist.h"

/* The secret of a torchrun-style store when HERD_JOB_SECRET is not set:
 * derived from its address, so it keeps out nobody who can reach it. */
#define TORCHRUN_DEFAULT_SECRET_PREFIX "herd-torchrun-unauthenticated:"

/* A variable of another tool (torchrun, Slurm, Open MPI): NULL when unset
 * or empty.  herd's own are read through herd__param_*. */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* A choice among the words of p's VALUES (its index): the explicit value,
 * else the variable's, else the default. */
static herd_status choose(herd__param p, const char *given, const char *field, int *out)
{
	if (given == NULL)
		return herd__param_choice(p, out);
	*out = herd__param_choice_of(p, given);
	if (*out < 0)
		return herd__error(HERD_EINVAL, "herd_comm_opts.%s \"%s\": expected %s", field,
				   given, herd__param_get(p)->values);
	return HERD_OK;
}

/* HERD_NET_LINK: "measure", or LATENCY_US,GBIT_PER_S. */
static herd_status parse_net_link(herd__comm_cfg *out)
{
	const char *v = herd__param_str(HERD__P_NET_LINK);
	char *end;
	double lat, gbit;

	if (v == NULL)
		return HERD_OK;
	if (strcmp(v, "measure") == 0) {
		out->net_measure = true;
		return HERD_OK;
	}
	errno = 0;
	lat = strtod(v, &end);
	gbit = *end == ',' ? strtod(end + 1, &end) : -1;
	if (*end != '\0' || errno != 0 || !isfinite(lat) || !isfinite(gbit) || lat <= 0 ||
	    lat > 1e6 || gbit <= 0 || gbit > 1e5)
		return herd__error(HERD_EINVAL, "HERD_NET_LINK=%s: expected the links between "
				   "hosts as LATENCY_US,GBIT_PER_S, e.g. \"5,100\" (one-way "
				   "latency 5 us, 100 Gbit/s), or \"measure\"", v);
	out->net_lat_us = lat;
	out->net_gbit = gbit;
	return HERD_OK;
}

herd_status herd__comm_timeout_source(herd_status st, const herd__comm_cfg *cfg)
{
	char msg[HERD__COMM_MSG_MAX];

	/* A timeout inside a call (herd__comm_timeout_call) says it already. */
	if (st != HERD_ETIMEDOUT || cfg->timeout_from[0] == '\0' ||
	    strstr(herd_last_error(), "; the deadline was ") != NULL)
		return st;
	herd__strlcpy(msg, herd_last_error(), sizeof(msg));
	return herd__error(st, "%s; the deadline was %s seconds", msg, cfg->timeout_from);
}

herd_status herd__comm_cfg_resolve(const herd_comm_opts *opts, herd__comm_cfg *out)
{
	/* What the words of HERD_TRANSPORT and HERD_ALGO select, in the table's order. */
	static const int transports[] = { HERD__TRANSPORT_AUTO, HERD__TRANSPORT_TCP };
	static const int algos[] = { HERD__CLASS_ANY, HERD__CLASS_BANDWIDTH, HERD__CLASS_LATENCY,
				     HERD__CLASS_HIER };
	herd_comm_opts defaults = HERD_COMM_OPTS_INIT;
	const char *ifname;
	long streams;
	int i;

	if (opts == NULL)
		opts = &defaults;
	HERD__CHECK_VERSION("herd_comm_init", opts, herd_comm_opts, COMM_OPTS);
	memset(out, 0, sizeof(*out));
	if (opts->timeout_ms < 0)
		return herd__error(HERD_EINVAL, "herd_comm_opts.timeout_ms is %d; expected 0 (the "
				   "default) or more", opts->timeout_ms);
	if (opts->timeout_ms > 0) {
		out->timeout_ms = opts->timeout_ms;
	} else {
		HERD_CHECK(herd__param_ms(HERD__P_TIMEOUT, &out->timeout_ms));
		if (herd__param_str(HERD__P_TIMEOUT) != NULL)
			snprintf(out->timeout_from, sizeof(out->timeout_from), "HERD_TIMEOUT=%.32s",
				 herd__param_str(HERD__P_TIMEOUT));
	}

	HERD_CHECK(choose(HERD__P_TRANSPORT, opts->transport, "transport", &i));
	out->transport = transports[i];
	HERD_CHECK(choose(HERD__P_ALGO, opts->algo, "algo", &i));
	out->algo = algos[i];

	ifname = opts->socket_ifname != NULL ? opts->socket_ifname
					     : herd__param_str(HERD__P_SOCKET_IFNAME);
	if (ifname != NULL && strlen(ifname) >= sizeof(out->ifname))
		return herd__error(HERD_EINVAL, "interface name from %s is too long",
				   opts->socket_ifname != NULL ? "herd_comm_opts.socket_ifname"
				   : "HERD_SOCKET_IFNAME");
	herd__strlcpy(out->ifname, ifname != NULL ? ifname : "", sizeof(out->ifname));

	HERD_CHECK(herd__param_int(HERD__P_SOCKET_STREAMS, &streams));
	out->streams = (int)streams;
	if (opts->version >= 2 && opts->trace_ring != 0) {
		out->trace_ring = opts->trace_ring < 0 ? 0
				  : opts->trace_ring > HERD__TRACE_MAX_RING ? HERD__TRACE_MAX_RING
				  : (uint32_t)opts->trace_ring;
	} else {
		long ring = HERD__TRACE_DEFAULT_RING;

		HERD_CHECK(herd__param_int(HERD__P_TRACE_RING, &ring));
		out->trace_ring = (uint32_t)ring;
	}
	HERD_CHECK(parse_net_link(out));
	return herd__param_bool(HERD__P_DEVICE_CHECK, &out->device_check);
}

/* ---- identity ------------------------------------------------------------- */

typedef struct identity {
	const char *style;        /* "herd", "torchrun", "Slurm", "Open MPI" */
	int rank, size;
	const char *store;        /* host:port to connect to */
	bool host_store;          /* torchrun without HERD_STORE: rank 0 serves */
	char master[300];         /* torchrun: MASTER_ADDR:MASTER_PORT */
	char master_host[256];
	int master_port;
	const char *secret;       /* NULL: HERD_JOB_SECRET (the store's default) */
	char default_secret[340];
	bool derived;             /* no store named: boot (bootstrap.h) says where */
	herd__boot boot;
	char found[300];          /* derived: the address of the store found */
} identity;

static herd_status parse_int(const char *var, const char *v, int min, int *out)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (end == v || *end != '\0' || errno != 0 || x < min || x > 1000000000)
		return herd__error(HERD_EINVAL, "%s=%s: expected an integer from %d to 1000000000",
				   var, v, min);
	*out = (int)x;
	return HERD_OK;
}

/* One style's rank and size variables, their values r and s (NULL: unset).
 * *found: either is set. */
static herd_status read_pair(identity *id, const char *style, const char *rank_var,
			     const char *r, const char *size_var, const char *s, bool *found)
{
	*found = r != NULL || s != NULL;
	if (!*found)
		return HERD_OK;
	if (r == NULL || s == NULL)
		return herd__error(HERD_EINVAL, "%s is set but %s is not (%s "
				   "style needs both)", r != NULL ? rank_var : size_var,
				   r != NULL ? size_var : rank_var, style);
	HERD_CHECK(parse_int(rank_var, r, 0, &id->rank));
	HERD_CHECK(parse_int(size_var, s, 1, &id->size));
	if (id->rank >= id->size)
		return herd__error(HERD_EINVAL, "%s=%d is not below %s=%d",
				   rank_var, id->rank, size_var, id->size);
	id->style = style;
	return HERD_OK;
}

static herd_status need_store(identity *id)
{
	id->store = herd__param_str(HERD__P_STORE);
	if (id->store == NULL)
		return herd__error(HERD_EINVAL, "rank %d of %d from %s "
				   "variables, but HERD_STORE (host:port of the job's store) is "
				   "not set", id->rank, id->size, id->style);
	return HERD_OK;
}

/*
 * No store named: every rank derives the same one (bootstrap.h) from the
 * host of rank 0, a tag naming the job, and a key the engine shares (NULL:
 * the user's secret file).  HERD_JOB_SECRET, when set, is the secret.
 */
static herd_status derive_store(identity *id, const char *host, const char *tag,
				const char *shared_key)
{
	herd__boot *b = &id->boot;

	if (strlen(host) >= sizeof(b->host) || strlen(tag) >= sizeof(b->tag))
		return herd__error(HERD_EINVAL, "the host \"%.60s\" or the "
				   "job tag \"%.60s\" is too long", host, tag);
	herd__strlcpy(b->host, host, sizeof(b->host));
	herd__strlcpy(b->tag, tag, sizeof(b->tag));
	if (herd__param_str(HERD__P_JOB_SECRET) != NULL)
		herd__strlcpy(b->secret, herd__param_str(HERD__P_JOB_SECRET), sizeof(b->secret));
	else
		HERD_CHECK(herd__boot_secret(shared_key, tag, b->secret, sizeof(b->secret)));
	id->secret = b->secret;
	id->derived = true;
	return HERD_OK;
}

/* The first name of a Slurm node list ("node[3-4,7]" -> "node3"). */
static herd_status first_node(const char *var, const char *list, char *out, size_t cap)
{
	herd__hostlist hl;
	herd_status st;

	st = herd__hostlist_expand(&hl, list);
	if (st != HERD_OK)
		return herd__error_wrap(st, "%s: ", var);
	if (hl.n == 0 || strlen(hl.names[0]) >= cap)
		st = herd__error(HERD_EINVAL, "%s=%s: expected a node list", var, list);
	else
		herd__strlcpy(out, hl.names[0], cap);
	herd__hostlist_free(&hl);
	return st;
}

/* Slurm: rank 0 runs on the first node of the step (srun's block and
 * cyclic distributions both put task 0 there). */
static herd_status slurm_store(identity *id)
{
	static const char *lists[] = { "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
				       "SLURM_NODELIST" };
	const char *job = env("SLURM_JOB_ID"), *step = env("SLURM_STEP_ID");
	const char *nnodes = env("SLURM_STEP_NUM_NODES");
	char host[256], tag[128];

	if (herd__param_str(HERD__P_STORE) != NULL)
		return need_store(id);
	if (job == NULL)
		return herd__error(HERD_EINVAL, "rank %d of %d from Slurm "
				   "variables, but SLURM_JOB_ID is not set (start the ranks with "
				   "srun, or set HERD_STORE)", id->rank, id->size);
	/* A batch script and salloc's shell have SLURM_PROCID=0 and the job's
	 * SLURM_NTASKS too, but no step: the other "ranks" never come. */
	if (step == NULL)
		return herd__error(HERD_EINVAL, "SLURM_PROCID=%d and SLURM_NTASKS=%d, but no "
				   "SLURM_STEP_ID: this is the job's batch script or salloc's "
				   "shell, not a task of an srun step; start the ranks with srun "
				   "(or herd launch --slurm)", id->rank, id->size);
	host[0] = '\0';
	if (nnodes != NULL && strcmp(nnodes, "1") == 0) {
		herd__strlcpy(host, "127.0.0.1", sizeof(host));
	} else {
		for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]) && host[0] == '\0'; i++)
			if (env(lists[i]) != NULL)
				HERD_CHECK(first_node(lists[i], env(lists[i]), host, sizeof(host)));
		if (host[0] == '\0')
			return herd__error(HERD_EINVAL, "rank %d of %d from "
					   "Slurm variables, but no node list (SLURM_STEP_NODELIST) "
					   "says where rank 0 runs; set HERD_STORE", id->rank,
					   id->size);
	}
	snprintf(tag, sizeof(tag), "slurm:%s.%s", job, step);
	return derive_store(id, host, tag, NULL);
}

/* Open MPI: one node, or MASTER_ADDR naming rank 0's host.  mpirun shares
 * a random per-job key with its ranks (for PSM), which keys the secret. */
static herd_status ompi_store(identity *id)
{
	const char *nodes = env("OMPI_MCA_orte_num_nodes"), *job = env("OMPI_MCA_ess_base_jobid");
	const char *local = env("OMPI_COMM_WORLD_LOCAL_SIZE"), *host = env("MASTER_ADDR");
	char tag[128];

	if (herd__param_str(HERD__P_STORE) != NULL)
		return need_store(id);
	if (host == NULL) {
		bool one_node = (nodes != NULL && strcmp(nodes, "1") == 0) ||
				(local != NULL && atoi(local) == id->size);

		if (!one_node)
			return herd__error(HERD_EINVAL, "rank %d of %d from "
					   "Open MPI variables on more than one node: set "
					   "MASTER_ADDR to the host of rank 0 (mpirun -x "
					   "MASTER_ADDR=HOST), or HERD_STORE", id->rank, id->size);
		host = "127.0.0.1";
	}
	if (job == NULL)
		return herd__error(HERD_EINVAL, "rank %d of %d from Open MPI "
				   "variables, but OMPI_MCA_ess_base_jobid is not set; set "
				   "HERD_STORE", id->rank, id->size);
	snprintf(tag, sizeof(tag), "ompi:%s", job);
	return derive_store(id, host, tag, env("OMPI_MCA_orte_precondition_transports"));
}

static herd_status torchrun_store(identity *id)
{
	const char *addr = env("MASTER_ADDR"), *port = env("MASTER_PORT");

	if (herd__param_str(HERD__P_STORE) != NULL)
		return need_store(id);
	if (addr == NULL || port == NULL)
		return herd__error(HERD_EINVAL, "rank %d of %d from torchrun "
				   "variables (RANK, WORLD_SIZE), but %s is not set, nor "
				   "HERD_STORE", id->rank, id->size,
				   addr == NULL && port == NULL ? "MASTER_ADDR nor MASTER_PORT"
				   : addr == NULL ? "MASTER_ADDR" : "MASTER_PORT");
	HERD_CHECK(parse_int("MASTER_PORT", port, 1, &id->master_port));
	if (id->master_port > 65535)
		return herd__error(HERD_EINVAL, "MASTER_PORT=%s: expected a port from 1 to 65535",
				   port);
	herd__strlcpy(id->master_host, addr, sizeof(id->master_host));
	if (strchr(addr, ':') != NULL)
		snprintf(id->master, sizeof(id->master), "[%s]:%d", addr, id->master_port);
	else
		snprintf(id->master, sizeof(id->master), "%s:%d", addr, id->master_port);
	/* torchrun's agent already serves its own store on MASTER_PORT: herd's
	 * goes to ports derived from the run, on the same host. */
	if (env("TORCHELASTIC_USE_AGENT_STORE") != NULL &&
	    strcmp(env("TORCHELASTIC_USE_AGENT_STORE"), "True") == 0) {
		char tag[700];
		const char *run = env("TORCHELASTIC_RUN_ID"),
			   *restart = env("TORCHELASTIC_RESTART_COUNT");

		snprintf(tag, sizeof(tag), "torchrun:%s:%s:%s", run != NULL ? run : "",
			 id->master, restart != NULL ? restart : "0");
		return derive_store(id, addr, tag, NULL);
	}
	id->store = id->master;
	id->host_store = id->rank == 0;
	if (herd__param_str(HERD__P_JOB_SECRET) == NULL) {
		snprintf(id->default_secret, sizeof(id->default_secret), "%s%s",
			 TORCHRUN_DEFAULT_SECRET_PREFIX, id->master);
		id->secret = id->default_secret;
		herd__log_warn("HERD_JOB_SECRET is not set: the store at %s uses a secret derived "
			       "from its address, so anyone who can reach it can join; set "
			       "HERD_JOB_SECRET to the same random value on every rank",
			       id->master);
	}
	return HERD_OK;
}

static herd_status find_identity(identity *id)
{
	bool found;

	memset(id, 0, sizeof(*id));
	HERD_CHECK(read_pair(id, "herd", "HERD_RANK", herd__param_str(HERD__P_RANK),
			     "HERD_WORLD_SIZE", herd__param_str(HERD__P_WORLD_SIZE), &found));
	if (found)
		return need_store(id);
	HERD_CHECK(read_pair(id, "torchrun", "RANK", env("RANK"), "WORLD_SIZE", env("WORLD_SIZE"),
			     &found));
	if (found)
		return torchrun_store(id);
	HERD_CHECK(read_pair(id, "Slurm", "SLURM_PROCID", env("SLURM_PROCID"), "SLURM_NTASKS",
			     env("SLURM_NTASKS"), &found));
	if (found)
		return slurm_store(id);
	HERD_CHECK(read_pair(id, "Open MPI", "OMPI_COMM_WORLD_RANK", env("OMPI_COMM_WORLD_RANK"),
			     "OMPI_COMM_WORLD_SIZE", env("OMPI_COMM_WORLD_SIZE"), &found));
	if (found)
		return ompi_store(id);
	return herd__error(HERD_EINVAL, "no rank identity in the "
			   "environment; set HERD_RANK and HERD_WORLD_SIZE (with HERD_STORE and "
			   "HERD_JOB_SECRET), or torchrun's RANK, WORLD_SIZE, MASTER_ADDR and "
			   "MASTER_PORT, or start the ranks with srun (SLURM_PROCID, SLURM_NTASKS) "
			   "or mpirun (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)");
}

/* Rank 0 of a derived store serves it; every rank then connects. */
static herd_status open_store(identity *id, const herd__comm_cfg *cfg,
			      herd_store_server **server, herd_store **store)
{
	herd_store_opts so = HERD_STORE_OPTS_INIT;
	herd_status st;

	if (id->derived) {
		if (id->rank == 0) {
			HERD_CHECK(herd__boot_serve(server, &id->boot));
			snprintf(id->found, sizeof(id->found), "127.0.0.1:%d",
				 herd_store_server_port(*server));
			id->store = id->found;
		} else {
			st = herd__boot_connect(store, &id->boot, cfg->timeout_ms, id->found,
						sizeof(id->found));
			id->store = id->found;
			return st;
		}
	} else if (id->host_store) {
		herd_store_server_opts sv = HERD_STORE_SERVER_OPTS_INIT;

		sv.host = id->master_host;
		sv.port = id->master_port;
		sv.secret = id->secret;
		st = herd_store_server_start(server, &sv);
		if (st != HERD_OK)
			return herd__error_wrap(st, "rank 0 (torchrun style) cannot host the store "
						"at %s: ", id->master);
	}
	so.secret = id->secret;
	so.timeout_ms = cfg->timeout_ms;
	so.connect_timeout_ms = cfg->timeout_ms;
	return herd_store_connect(store, id->store, &so);
}

herd_status herd_comm_init_env(herd_comm **out, const herd_comm_opts *opts)
{
	herd_store_server *server = NULL;
	herd_store *store = NULL, *ns = NULL;
	herd__comm_cfg cfg;
	identity id;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_init_env: out is NULL");
	*out = NULL;
	HERD_CHECK(herd__comm_cfg_resolve(opts, &cfg));
	HERD_CHECK(find_identity(&id));
	st = open_store(&id, &cfg, &server, &store);
	if (st != HERD_OK) {
		/* The store's own messages begin with its address. */
		herd__error_wrap(st, "rank %d of %d (%s style): ", id.rank, id.size, id.style);
		st = herd__comm_timeout_source(st, &cfg);
		goto fail;
	}
	/* A namespace of its own, apart from other users of the job's store. */
	HERD_CHECK_GOTO(herd_store_prefix(&ns, store, "comm/"), st, fail);
	st = herd__comm_init_cfg(out, ns, id.rank, id.size, &cfg);
	herd_store_free(ns);
	if (st != HERD_OK) {
		st = herd__comm_timeout_source(st, &cfg);
		goto fail;
	}
	(*out)->owned_store = store;
	(*out)->owned_server = server;
	return HERD_OK;
fail:
	herd_store_free(store);
	herd_store_server_free(server);
	return st;
}
