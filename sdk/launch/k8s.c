/*
 * sdk/launch/k8s.c - herd_k8s_manifest (herd/k8s.h): the Secret, the
 * headless Service and the Indexed Job of a herd job, built as JSON and
 * written as YAML (sdk/base/yaml.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base.h"
#include "param.h"
#include "herd/k8s.h"
#include "herd/store.h"

#define NAME_MAX_LEN 50
#define SECRET_DIR "/var/run/herd"

/* A DNS label of at most max characters: lower-case letters, digits, '-'; from a letter
 * (a DNS-1035 label, as a Service's name must be), not ending in '-'. */
static herd_status check_label(const char *what, const char *s, size_t max, bool digit_first)
{
	size_t n = s != NULL ? strlen(s) : 0;

	if (n == 0 || n > max || s[n - 1] == '-' ||
	    !(islower((unsigned char)s[0]) || (digit_first && isdigit((unsigned char)s[0]))))
		goto bad;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
			goto bad;
	return HERD_OK;
bad:
	return herd__error(HERD_EINVAL, "%s \"%s\": Kubernetes takes a name of 1 to %zu lower-case "
			   "letters, digits and '-', from a letter%s, not ending in '-'", what,
			   s != NULL ? s : "", max, digit_first ? " or digit" : "");
}

/* "NAME=VALUE" with NAME a variable's name; *eq at the '='. */
static herd_status check_var(const char *what, const char *v, const char **eq)
{
	*eq = strchr(v, '=');
	if (*eq == NULL || *eq == v || !(isalpha((unsigned char)v[0]) || v[0] == '_'))
		return herd__error(HERD_EINVAL, "%s \"%s\": expected NAME=VALUE", what, v);
	for (const char *p = v; p < *eq; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return herd__error(HERD_EINVAL, "%s \"%s\": expected NAME=VALUE, NAME of "
					   "letters, digits and '_'", what, v);
	return HERD_OK;
}

static herd_status check_opts(const herd_k8s_opts *o)
{
	if (o == NULL)
		return herd__error(HERD_EINVAL, "herd_k8s_manifest: opts is NULL");
	HERD__CHECK_VERSION("herd_k8s_manifest", o, herd_k8s_opts, K8S_OPTS);
	HERD_CHECK(check_label("the job's name", o->name, NAME_MAX_LEN, false));
	if (o->namespace_ != NULL)
		HERD_CHECK(check_label("the namespace", o->namespace_, 63, true));
	if (o->secret != NULL && (strlen(o->secret) != 64 ||
				  strspn(o->secret, "0123456789abcdef") != 64))
		return herd__error(HERD_EINVAL, "the job's secret: expected 64 lower-case hex digits "
				   "(as a drawn secret is)");
	if (o->image == NULL || o->image[0] == '\0' || strpbrk(o->image, " \t\n") != NULL)
		return herd__error(HERD_EINVAL, "the image \"%s\": expected an image reference "
				   "(registry/name:tag)", o->image != NULL ? o->image : "");
	if (o->nodes < 1 || o->nodes > 65536)
		return herd__error(HERD_EINVAL, "the nodes: %d; expected 1 to 65536", o->nodes);
	if (o->per_node < 1 || o->per_node > 1024)
		return herd__error(HERD_EINVAL, "the ranks per node: %d; expected 1 to 1024",
				   o->per_node);
	if (o->gpus_per_rank < 0 || (long)o->gpus_per_rank * o->per_node > 1024)
		return herd__error(HERD_EINVAL, "the GPUs per rank: %d; expected 0 or more, at most "
				   "1024 a pod", o->gpus_per_rank);
	if (o->restarts < 0 || o->restarts > 1000)
		return herd__error(HERD_EINVAL, "the restarts: %d; expected 0 to 1000", o->restarts);
	if (o->port < 0 || o->port > 65535)
		return herd__error(HERD_EINVAL, "the port: %d; expected 1 to 65535", o->port);
	if (o->argv == NULL || o->argv[0] == NULL || o->argv[0][0] == '\0')
		return herd__error(HERD_EINVAL, "the ranks' command: expected a program and its "
				   "arguments");
	for (size_t i = 0; o->env != NULL && o->env[i] != NULL; i++) {
		const char *eq;

		HERD_CHECK(check_var("the variable", o->env[i], &eq));
	}
	return HERD_OK;
}

/* A string of a command or a variable's value, as Kubernetes reads it:
 * it expands $(NAME) there and takes $$ for $, so every $ is doubled. */
static json_t *k8s_text(const char *s, size_t len)
{
	herd__text t = { 0 };
	char *out = NULL;
	json_t *j;

	for (size_t i = 0; i < len; i++)
		herd__text_printf(&t, s[i] == '$' ? "$$" : "%c", s[i]);
	if (herd__text_take(&t, &out) != HERD_OK)
		return NULL;
	j = json_string(out);
	free(out);
	return j;
}

static json_t *metadata(const herd_k8s_opts *o, const char *name)
{
	json_t *m = json_pack("{s:s, s:{s:s}}", "name", name, "labels", "herd.dev/job", o->name);

	if (m != NULL && o->namespace_ != NULL)
		json_object_set_new(m, "namespace", json_string(o->namespace_));
	return m;
}

/* Sets obj[key][sub] = value, making obj[key] when missing. */
static void set_in(json_t *obj, const char *key, const char *sub, json_t *value)
{
	json_t *m = json_object_get(obj, key);

	if (m == NULL) {
		m = json_object();
		json_object_set_new(obj, key, m);
	}
	json_object_set_new(m, sub, value);
}

/* One "PATH=VALUE" of opts->set onto the pod's spec, container and metadata. */
static herd_status apply_set(const char *entry, json_t *pod, json_t *container, json_t *meta)
{
	const char *eq = strchr(entry, '='), *dot;
	char path[128];

	if (eq != NULL && (size_t)(eq - entry) >= sizeof(path))
		return herd__error(HERD_EINVAL, "\"%.40s...\": a path of %zu characters; at most %zu",
				   entry, (size_t)(eq - entry), sizeof(path) - 1);
	if (eq == NULL || eq == entry)
		return herd__error(HERD_EINVAL, "\"%s\": expected PATH=VALUE (nodeSelector.KEY=V, "
				   "toleration=KEY[=V]:EFFECT, requests.cpu=8, limits.memory=64Gi, "
				   "serviceAccountName=NAME, label.KEY=V, annotation.KEY=V)", entry);
	snprintf(path, sizeof(path), "%.*s", (int)(eq - entry), entry);
	if (strcmp(path, "label.herd.dev/job") == 0 || strcmp(path, "requests.nvidia.com/gpu") == 0 ||
	    strcmp(path, "limits.nvidia.com/gpu") == 0)
		return herd__error(HERD_EINVAL, "\"%s\": herd sets %s itself (%s)", entry, path,
				   path[0] == 'l' && path[1] == 'a' ? "the Service selects the pods by it"
				   : "--gpus-per-rank x --per-node");
	dot = strchr(path, '.');
	if (dot != NULL && dot[1] != '\0') {
		const char *sub = dot + 1;
		size_t head = (size_t)(dot - path);

		if (head == strlen("nodeSelector") && strncmp(path, "nodeSelector", head) == 0)
			set_in(pod, "nodeSelector", sub, json_string(eq + 1));
		else if (head == strlen("requests") && strncmp(path, "requests", head) == 0)
			set_in(json_object_get(container, "resources"), "requests", sub,
			       json_string(eq + 1));
		else if (head == strlen("limits") && strncmp(path, "limits", head) == 0)
			set_in(json_object_get(container, "resources"), "limits", sub,
			       json_string(eq + 1));
		else if (head == strlen("label") && strncmp(path, "label", head) == 0)
			set_in(meta, "labels", sub, json_string(eq + 1));
		else if (head == strlen("annotation") && strncmp(path, "annotation", head) == 0)
			set_in(meta, "annotations", sub, json_string(eq + 1));
		else
			goto unknown;
		return HERD_OK;
	}
	if (strcmp(path, "toleration") == 0) {
		const char *colon = strrchr(eq + 1, ':'), *veq;
		char key[256];
		json_t *t, *list;

		if (colon == NULL || colon == eq + 1 || colon[1] == '\0' ||
		    (size_t)(colon - eq - 1) >= sizeof(key))
			return herd__error(HERD_EINVAL, "\"%s\": a toleration is KEY[=VALUE]:EFFECT "
					   "(nvidia.com/gpu:NoSchedule)", entry);
		if (strcmp(colon + 1, "NoSchedule") != 0 && strcmp(colon + 1, "PreferNoSchedule") != 0 &&
		    strcmp(colon + 1, "NoExecute") != 0)
			return herd__error(HERD_EINVAL, "\"%s\": the effect \"%s\" is not NoSchedule, "
					   "PreferNoSchedule or NoExecute", entry, colon + 1);
		snprintf(key, sizeof(key), "%.*s", (int)(colon - eq - 1), eq + 1);
		veq = strchr(key, '=');
		if (veq != NULL) {
			t = json_pack("{s:s%, s:s, s:s, s:s}", "key", key, (size_t)(veq - key),
				      "operator", "Equal", "value", veq + 1, "effect", colon + 1);
		} else {
			t = json_pack("{s:s, s:s, s:s}", "key", key, "operator", "Exists", "effect",
				      colon + 1);
		}
		list = json_object_get(pod, "tolerations");
		if (list == NULL) {
			list = json_array();
			json_object_set_new(pod, "tolerations", list);
		}
		json_array_append_new(list, t);
		return HERD_OK;
	}
	if (strcmp(path, "serviceAccountName") == 0 || strcmp(path, "priorityClassName") == 0 ||
	    strcmp(path, "schedulerName") == 0) {
		json_object_set_new(pod, path, json_string(eq + 1));
		return HERD_OK;
	}
unknown:
	return herd__error(HERD_EINVAL, "\"%s\": %s is not one herd sets (nodeSelector.KEY, "
			   "toleration, requests.NAME, limits.NAME, serviceAccountName, "
			   "priorityClassName, schedulerName, label.KEY, annotation.KEY)", entry,
			   path);
}

/* The Job: one pod per node, its container the herd program's `k8s node`. */
static herd_status make_job(const herd_k8s_opts *o, int port, json_t **out)
{
	json_t *env = json_array(), *cmd = json_array(), *container, *pod, *meta, *job;
	char num[32], gpus[32], secret_name[NAME_MAX_LEN + 8];
	herd_status st = HERD_OK;

	json_array_append_new(cmd, json_string(o->herd != NULL ? o->herd : "herd"));
	json_array_append_new(cmd, json_string("k8s"));
	json_array_append_new(cmd, json_string("node"));
	json_array_append_new(cmd, json_string("--job"));
	json_array_append_new(cmd, json_string(o->name));
	snprintf(num, sizeof(num), "%d", o->nodes);
	json_array_append_new(cmd, json_string("--nodes"));
	json_array_append_new(cmd, json_string(num));
	snprintf(num, sizeof(num), "%d", o->per_node);
	json_array_append_new(cmd, json_string("--per-node"));
	json_array_append_new(cmd, json_string(num));
	if (o->gpus_per_rank > 0) {
		snprintf(num, sizeof(num), "%d", o->gpus_per_rank);
		json_array_append_new(cmd, json_string("--gpus-per-rank"));
		json_array_append_new(cmd, json_string(num));
	}
	snprintf(num, sizeof(num), "%d", port);
	json_array_append_new(cmd, json_string("--port"));
	json_array_append_new(cmd, json_string(num));
	json_array_append_new(cmd, json_string("--secret-file"));
	json_array_append_new(cmd, json_string(SECRET_DIR "/secret"));
	json_array_append_new(cmd, json_string("--"));
	for (size_t i = 0; o->argv[i] != NULL; i++)
		json_array_append_new(cmd, k8s_text(o->argv[i], strlen(o->argv[i])));
	for (size_t i = 0; o->env != NULL && o->env[i] != NULL; i++) {
		const char *eq = strchr(o->env[i], '=');

		json_array_append_new(env, json_pack("{s:s%, s:o}", "name", o->env[i],
						     (size_t)(eq - o->env[i]), "value",
						     k8s_text(eq + 1, strlen(eq + 1))));
	}
	container = json_pack("{s:s, s:s, s:o, s:o, s:[{s:s, s:i, s:s}], s:{}, "
			      "s:[{s:s, s:s, s:b}]}", "name", "herd", "image", o->image, "command",
			      cmd, "env", env, "ports", "name", "store", "containerPort", port,
			      "protocol", "TCP", "resources", "volumeMounts", "name", "herd-secret",
			      "mountPath", SECRET_DIR, "readOnly", 1);
	if (container != NULL && o->gpus_per_rank > 0) {
		json_t *r = json_object_get(container, "resources");

		snprintf(gpus, sizeof(gpus), "%d", o->gpus_per_rank * o->per_node);
		set_in(r, "requests", "nvidia.com/gpu", json_string(gpus));
		set_in(r, "limits", "nvidia.com/gpu", json_string(gpus));
	}
	snprintf(secret_name, sizeof(secret_name), "%s-secret", o->name);
	pod = json_pack("{s:s, s:s, s:[o], s:[{s:s, s:{s:s, s:i}}]}", "subdomain", o->name,
			"restartPolicy", "Never", "containers", container, "volumes", "name",
			"herd-secret", "secret", "secretName", secret_name, "defaultMode", 0444);
	meta = json_pack("{s:{s:s}}", "labels", "herd.dev/job", o->name);
	if (pod == NULL || meta == NULL) {
		json_decref(pod);
		json_decref(meta);
		return herd__error(HERD_EINVAL, "a job's manifest: a name, argument or value that is not UTF-8, or out of memory");
	}
	for (size_t i = 0; o->set != NULL && o->set[i] != NULL && st == HERD_OK; i++)
		st = apply_set(o->set[i], pod, container, meta);
	if (st != HERD_OK) {
		json_decref(pod);
		json_decref(meta);
		return st;
	}
	job = json_pack("{s:s, s:s, s:o, s:{s:s, s:i, s:i, s:i, s:{s:[{s:s, s:{s:s, s:s, s:[i, i]}}, "
			"{s:s, s:[{s:s, s:s}]}]}, s:{s:o, s:o}}}", "apiVersion", "batch/v1", "kind",
			"Job", "metadata", metadata(o, o->name), "spec", "completionMode", "Indexed",
			"completions", o->nodes, "parallelism", o->nodes, "backoffLimit",
			o->restarts * o->nodes,
			"podFailurePolicy", "rules", "action", "FailJob", "onExitCodes",
			"containerName", "herd", "operator", "In", "values", 126, 127, "action",
			"Ignore", "onPodConditions", "type", "DisruptionTarget", "status", "True",
			"template", "metadata", meta, "spec", pod);
	if (job == NULL)
		return herd__error(HERD_EINVAL, "a job's manifest: a name, argument or value that is not UTF-8, or out of memory");
	*out = job;
	return HERD_OK;
}

herd_status herd_k8s_manifest(const herd_k8s_opts *o, char **yaml)
{
	char secret[HERD_STORE_SECRET_BUF], name[NAME_MAX_LEN + 8];
	json_t *docs[3] = { NULL, NULL, NULL };
	herd__text t = { 0 };
	int port;
	herd_status st = HERD_OK;

	if (yaml == NULL)
		return herd__error(HERD_EINVAL, "herd_k8s_manifest: yaml is NULL");
	*yaml = NULL;
	HERD_CHECK(check_opts(o));
	port = o->port > 0 ? o->port : HERD_K8S_PORT;
	if (o->secret != NULL)
		herd__strlcpy(secret, o->secret, sizeof(secret));
	else
		HERD_CHECK(herd_store_secret_generate(secret));
	snprintf(name, sizeof(name), "%s-secret", o->name);
	docs[0] = json_pack("{s:s, s:s, s:o, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Secret",
			    "metadata", metadata(o, name), "type", "Opaque", "stringData", "secret",
			    secret);
	docs[1] = json_pack("{s:s, s:s, s:o, s:{s:s, s:b, s:{s:s}, s:[{s:s, s:i, s:i, s:s}]}}",
			    "apiVersion", "v1", "kind", "Service", "metadata", metadata(o, o->name),
			    "spec", "clusterIP", "None", "publishNotReadyAddresses", 1, "selector",
			    "herd.dev/job", o->name, "ports", "name", "store", "port", port,
			    "targetPort", port, "protocol", "TCP");
	if (docs[0] == NULL || docs[1] == NULL)
		st = herd__error(HERD_EINVAL, "a job's manifest: a name, argument or value that is not UTF-8, or out of memory");
	if (st == HERD_OK)
		st = make_job(o, port, &docs[2]);
	for (int i = 0; i < 3 && st == HERD_OK; i++) {
		if (i > 0)
			herd__text_printf(&t, "---\n");
		st = herd__yaml(docs[i], &t);
	}
	if (st == HERD_OK)
		st = herd__text_take(&t, yaml);
	herd__text_free(&t);
	for (int i = 0; i < 3; i++)
		json_decref(docs[i]);
	explicit_bzero(secret, sizeof(secret));
	return st;
}

herd_status herd_k8s_secret(char secret[65])
{
	if (secret == NULL)
		return herd__error(HERD_EINVAL, "herd_k8s_secret: secret is NULL");
	return herd__read_secret_file(herd__param_str(HERD__P_JOB_SECRET_FILE), secret, 65);
}
