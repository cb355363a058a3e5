/*
 * herd/serve.h - a service: MIN to MAX independent replicas of a command
 * behind a load balancer (HAProxy), each restarted alone when it fails,
 * restarted one by one on request, and scaled with demand.
 *
 * A service is described by a herd_serve_spec and started by
 * herd_serve_start.  The starting process then:
 *
 *   - starts HAProxy (HERD_HAPROXY, else `haproxy` in PATH; 2.0 or newer)
 *     as the service's front door on spec.bind:spec.port, with a backend
 *     of max_replicas server slots that herd fills, drains and empties at
 *     run time through HAProxy's runtime API on an admin socket only this
 *     user may open (no reload per change).  Connection failures are
 *     retried, on another replica where there is one (retries 3, option
 *     redispatch, retry-on conn-failure empty-response, and a replica that
 *     refuses a connection is marked down at once): a replica that dies
 *     between requests, or before it answers one, costs no request;
 *     HAProxy checks each replica (spec.health: an HTTP GET of a path that
 *     must answer 2xx or 3xx, or a TCP connect) every 500 ms;
 *   - runs each replica as a job of one rank (herd/job.h) on this node, a
 *     node of the hostlist or hostfile (ssh) or of the Slurm allocation
 *     (srun), placed on the node with the fewest replicas, with
 *     gpus_per_replica GPUs leased and bound as a rank's are, and in its
 *     environment, beside a rank's: HERD_REPLICA (its index, from 0),
 *     HERD_PORT (replica_port + index: where it must listen), HERD_LISTEN
 *     (the address to listen on: 127.0.0.1 on this node, 0.0.0.0 on
 *     others) and HERD_SERVICE (the service's id);
 *   - puts a replica in the balancer once its check passes, within
 *     start_timeout_ms of its start;
 *   - takes a replica that fails (it exits, or fails its check for 10 s)
 *     out of the balancer at once, and starts it again alone after a
 *     back-off (1 s, doubling to 30 s), at most spec.restarts times in a
 *     row (a replica ready for 60 s starts a new row, and its back-off
 *     again at 1 s); one that fails again after them is left down and
 *     reported, and the others go on serving.  A service whose every
 *     wanted replica is down for good ends, failed; a count lowered
 *     (herd_serve_scale, autoscaling) gives the slots that stay and are
 *     down a new start;
 *   - with spec.target, scales between min_replicas and max_replicas from
 *     HAProxy's own statistics: the requests in flight (at replicas and
 *     queued for one: the backend's scur) divided by target, rounded up,
 *     gives the replicas wanted; more
 *     than run start at once, fewer are drained only once the most wanted
 *     over the last cooldown_ms is below what runs (HPA's stabilization
 *     window);
 *   - answers on a control socket as a job does (herd/jobs.h): `herd jobs`
 *     lists the service, `herd job status` shows each replica's state,
 *     requests and errors, `herd job scale` and `herd job restart
 *     [--rolling]` act on it, `herd job stop` stops it.
 *
 * Every decision (a replica ready, failed, restarted or given up; each
 * scaling with its reason) is one line to spec.event, and kept in the
 * status's "events" (the last 32).  spec.event runs on the service's
 * thread: it must not call herd_serve_stop, _wait, _wait_ready or _free
 * (they wait for that thread).
 *
 * A rolling restart restarts one replica at a time: drained, stopped,
 * started and back in the balancer before the next is drained.  A
 * restarted replica that fails stops the roll (the others keep running
 * what they ran).  With one replica, or none other ready, requests find
 * no replica while it restarts (HAProxy answers 503).
 *
 * Draining a replica (a rolling restart, a scale down, a stop): HAProxy
 * sends it no new request, the requests in flight on it finish within
 * grace_ms, then it gets SIGTERM and, grace_ms later, SIGKILL.
 *
 * Threads.  herd_serve_start starts a thread that owns the service's
 * processes and sockets; spec.event and spec.output run on it or on the
 * replicas' job threads.  The other calls may come from any thread, except
 * herd_serve_free.
 */
#ifndef HERD_SERVE_H
#define HERD_SERVE_H

#include "common.h"
#include "job.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct herd_serve herd_serve;

#define HERD_SERVE_SPEC_VERSION 1

typedef struct herd_serve_spec {
	unsigned int version;        /* HERD_SERVE_SPEC_VERSION */
	const char *const *argv;     /* a replica's program and arguments; required */
	const char *const *env;      /* NAME=VALUE added to every replica's; may be NULL */
	herd_job_where where;        /* default HERD_JOB_LOCAL */
	const char *hosts;           /* hostlist expression or hostfile path (per where) */
	int min_replicas;            /* at least 1 */
	int max_replicas;            /* at least min_replicas, at most 1024 */
	int replicas;                /* replicas at the start; 0: min_replicas */
	int gpus_per_replica;        /* GPUs leased and bound per replica; 0: none */
	const char *bind;            /* the front door's address; default "127.0.0.1" */
	int port;                    /* the front door's port; required, not a replica's */
	int replica_port;            /* replica i listens on replica_port + i; default port + 1 */
	/* "/path": an HTTP GET that must answer 2xx or 3xx; "tcp" or NULL: a
	 * TCP connect */
	const char *health;
	int start_timeout_ms;        /* start to first passed check; default 60000 */
	int grace_ms;                /* drain, and SIGTERM to SIGKILL; default 10000 */
	int restarts;                /* a replica's restarts in a row; failing again after
				      * them, it is left down (HERD_SERVE_SPEC_INIT: 3) */
	/* Requests in flight per replica that autoscaling aims at; 0: no
	 * autoscaling (the count changes only on request) */
	int target;
	int cooldown_ms;             /* the scale-down window; default 30000 */
	int replica_conns;           /* requests a replica takes at once, the rest
				      * queue in HAProxy; 0: no limit */
	const char *herd_program;    /* `herd` on remote nodes; default $HERD_PROGRAM, else "herd" */
	int connect_timeout_ms;      /* ssh ConnectTimeout; default 10000 */
	const char *workdir;         /* the replicas' working directory; default this one's */
	/* Replicas' output lines, rank being the replica's index (as
	 * herd_job_spec's); NULL: herd_job_output_stdio with the prefix
	 * "[%h:r%r] ".  herd_job_output_stdio takes its prefix format
	 * (%h host, %r the replica's index, %%) as output_userdata */
	herd_job_output_fn output;
	void *output_userdata;
	/* Each decision of the service, one line without a newline; NULL: the
	 * log (herd/common.h) at HERD_LOG_INFO */
	void (*event)(void *userdata, const char *line);
	void *event_userdata;
} herd_serve_spec;

#define HERD_SERVE_SPEC_INIT \
	{ HERD_SERVE_SPEC_VERSION, NULL, NULL, HERD_JOB_LOCAL, NULL, 1, 1, 0, 0, NULL, 0, 0, \
	  NULL, 0, 0, 3, 0, 0, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL }

/*
 * Starts a service: checks HAProxy (HERD_EUNAVAIL when it is missing or
 * older than 2.0, saying which and how to install it), starts it on the
 * front door (HERD_EBUSY when the port is taken, quoting HAProxy) and the
 * first replicas, and returns; the replicas go on starting (herd_serve_wait_ready).
 * HERD_EINVAL for a bad spec (the message names the field), HERD_EFORMAT
 * for a malformed hostlist or hostfile.  The caller frees *out with
 * herd_serve_free.
 */
HERD_EXTERN herd_status herd_serve_start(herd_serve **out, const herd_serve_spec *spec);

/*
 * Waits until at least n replicas are in the balancer (HERD_OK), the
 * service is over (HERD_ECLOSED) or timeout_ms passes (HERD_ETIMEDOUT,
 * saying how many are ready; herd_serve_status says why the others are
 * not).
 */
HERD_EXTERN herd_status herd_serve_wait_ready(herd_serve *svc, int n, int timeout_ms);

/*
 * The service's status as JSON, into *json (malloc; the caller frees):
 *   {"id", "kind": "service", "pid", "command", "hosts", "nodes", "ranks"
 *    (replicas running), "state" ("starting", "serving", "stopping",
 *    "failed", "stopped"), "restarts" (of all replicas), "started", "age",
 *    "front" (ADDR:PORT), "haproxy" (its version), "min_replicas",
 *    "max_replicas", "wanted", "target", "in_flight" (at replicas and
 *    queued), "queued",
 *    "replicas": [{"index", "host", "port", "state" ("starting",
 *      "ready", "draining", "stopping", "backoff", "down", "off"), "pid",
 *      "restarts" (all its restarts), "requests", "errors", "in_flight",
 *      "why" (its last failure)}, ...]: every slot that runs, ran or failed,
 *    "events": ["...", ...]}
 * requests and errors are HAProxy's counts for the replica's slot since
 * the service started (errors: 5xx answers, failed connections and
 * failed answers).
 */
HERD_EXTERN herd_status herd_serve_status(herd_serve *svc, char **json);

/*
 * Sets the replicas wanted to n (min_replicas..max_replicas, else
 * HERD_EINVAL naming the range): new ones start, the newest beyond n are
 * drained and stopped.  With autoscaling, it goes on from n.  Returns at
 * once; HERD_ECLOSED when the service is over or stopping.
 */
HERD_EXTERN herd_status herd_serve_scale(herd_serve *svc, int n);

/*
 * Restarts every replica (those down for good too): rolling, one at a
 * time (drain, stop, start, wait for its check, next), or all at once.
 * Returns at once; HERD_EBUSY while a rolling restart is under way,
 * HERD_ECLOSED when the service is over or stopping.
 */
HERD_EXTERN herd_status herd_serve_restart(herd_serve *svc, bool rolling);

/*
 * Stops the service: every replica drained and stopped (grace_ms, then
 * SIGKILL), HAProxy last.  Returns once all are gone.
 */
HERD_EXTERN herd_status herd_serve_stop(herd_serve *svc);
/*
 * The caller was interrupted (a Ctrl-C): the service stops as
 * herd_serve_stop stops it, without waiting; a call after a stop was
 * asked kills every replica at once, none drained.  Does not block.
 */
HERD_EXTERN herd_status herd_serve_interrupt(herd_serve *svc);

/*
 * Waits until the service is over (stopped, or every replica down for
 * good) or timeout_ms passes (HERD_ETIMEDOUT).  *failed (may be NULL):
 * whether it ended failed; herd_serve_failure says why.
 */
HERD_EXTERN herd_status herd_serve_wait(herd_serve *svc, int timeout_ms, bool *failed);

/* A descriptor readable once the service is over (as herd_job_fd). */
HERD_EXTERN int herd_serve_fd(const herd_serve *svc);

HERD_EXTERN const char *herd_serve_id(const herd_serve *svc);
/* Why the service failed; NULL while it has not (the text stays until herd_serve_free). */
HERD_EXTERN const char *herd_serve_failure(const herd_serve *svc);

/* Stops the service if it runs and frees it.  Accepts NULL. */
HERD_EXTERN void herd_serve_free(herd_serve *svc);

#ifdef __cplusplus
}
#endif

#endif /* HERD_SERVE_H */
