/*
 * herd/k8s.h - a herd job as the Kubernetes objects that run it, for a
 * cluster with NVIDIA's GPU operator:
 *
 *   - a Secret holding the job's secret, mounted into every pod as the
 *     file /var/run/herd/secret (mode 0444, so that an image that runs
 *     as another user reads it), not in the manifest's environment or
 *     command line (inside the pod herd gives it to the ranks as
 *     HERD_JOB_SECRET, as every herd job's ranks get it);
 *   - a headless Service whose name is the pods' subdomain, so that pod i
 *     is JOB-i.JOB (Kubernetes' name for an Indexed Job's pod i), and pod 0
 *     is where every pod reaches the job's store;
 *   - an Indexed Job (completionMode Indexed) of one pod per node:
 *     parallelism and completions the node count, backoffLimit the
 *     restarts times the node count (a failed run fails every pod once,
 *     and each counts), a pod failure policy that fails the job at once on a
 *     command that cannot run (exit 126 and 127) and does not count a pod
 *     evicted or preempted (the DisruptionTarget condition), each pod
 *     asking per_node x gpus_per_rank nvidia.com/gpu (requests and
 *     limits), and labelled herd.dev/job: JOB.
 *
 * Each pod runs `herd k8s node --job JOB --nodes N --per-node K
 * [--gpus-per-rank G] --port P --secret-file /var/run/herd/secret -- CMD`
 * with opts->env's variables; Kubernetes adds JOB_COMPLETION_INDEX, the
 * pod's node index.  Kubernetes expands $(NAME) in a command and in
 * variables' values and takes $$ for $: every $ of opts->argv and
 * opts->env is written $$, so that the ranks get what was given.  Pod 0 runs the job's launcher, whose nodes connect
 * back (herd_job_spec.where HERD_JOB_K8S), beside its own node.
 */
#ifndef HERD_K8S_H
#define HERD_K8S_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HERD_K8S_OPTS_VERSION 1

/* The port of pod 0's store by default. */
#define HERD_K8S_PORT 29400

typedef struct herd_k8s_opts {
	unsigned int version;       /* HERD_K8S_OPTS_VERSION */
	/* The objects' name, a DNS label of at most 50 characters (lower-case
	 * letters, digits and '-', from a letter, not ending in '-'; the
	 * Job's pods add "-INDEX-XXXXX" to it). */
	const char *name;
	const char *image;          /* the pods' image, holding the herd program; required */
	const char *namespace_;     /* NULL: none (kubectl's current namespace) */
	int nodes;                  /* pods, 1 or more */
	int per_node;               /* ranks per pod, 1 or more */
	int gpus_per_rank;          /* 0: no GPU asked */
	int restarts;               /* whole-job restarts, 0 or more (backoffLimit restarts x nodes) */
	const char *const *argv;    /* the ranks' command, NULL-terminated; required */
	const char *const *env;     /* NAME=VALUE for every rank, NULL-terminated; may be NULL */
	/*
	 * What else the pods get, each "PATH=VALUE", NULL-terminated; may be
	 * NULL: nodeSelector.KEY=VALUE; toleration=KEY[=VALUE]:EFFECT (an
	 * Exists toleration without =VALUE); requests.NAME=QUANTITY and
	 * limits.NAME=QUANTITY (cpu=8, memory=64Gi) for the container;
	 * serviceAccountName=, priorityClassName=, schedulerName=; label.KEY=
	 * and annotation.KEY= on the pods.
	 */
	const char *const *set;
	int port;                   /* pod 0's store; 0: HERD_K8S_PORT */
	const char *herd;           /* the herd program in the image; NULL: "herd" */
	const char *secret;         /* the job's secret; NULL: drawn at random */
} herd_k8s_opts;

#define HERD_K8S_OPTS_INIT { HERD_K8S_OPTS_VERSION, NULL, NULL, NULL, 0, 0, 0, 0, NULL, NULL, \
			     NULL, 0, NULL, NULL }

/*
 * The three objects as one YAML stream (documents separated by "---")
 * into *yaml (malloc; the caller frees).  HERD_EINVAL, before anything is
 * written, naming the field: a name Kubernetes refuses, a count out of
 * range, no image or command, a "set" entry it does not know, a variable
 * that is not NAME=VALUE.
 */
HERD_EXTERN herd_status herd_k8s_manifest(const herd_k8s_opts *opts, char **yaml);

/*
 * The job's secret in a pod: the file HERD_JOB_SECRET_FILE names (the
 * manifest's Secret, mounted), 64 hex digits, into secret.  HERD_EINVAL
 * naming the variable or the file.
 */
HERD_EXTERN herd_status herd_k8s_secret(char secret[65]);

#ifdef __cplusplus
}
#endif

#endif /* HERD_K8S_H */
