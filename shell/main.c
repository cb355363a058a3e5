/*
 * shell/main.c - the herd program: subcommands, and otherwise the Lua
 * interpreter of lua.c with the herd module loaded.
 *
 *   herd                      REPL when stdin is a terminal, else stdin as a script
 *   herd [options] FILE.lua [args]    run a script with `arg` as lua sets it
 *   herd -e CODE              run code
 *   herd COMMAND ...          a subcommand (discover, launch, ...)
 *   herd help [COMMAND]       this help, or a command's (herd COMMAND --help)
 *   herd help env             the HERD_* environment variables (herd_env_table)
 *
 * Exit status: 0, 1 when a script or command failed (or a checkpoint save
 * still in flight failed as the Lua state closed), 2 for a usage error or
 * a bad input file (herd launch keeps its own apart from its ranks': 125).
 * os.exit closes the Lua state first (os_exit below).
 */
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd.h"
#include "lua_herd.h"
#include "shell.h"

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *usage;
} commands[] = {
	{ "discover", cmd_discover,
	  "discover [--json] [--save FILE] [--inventory FILE]\n"
	  "        [--hosts EXPR | --hostfile F | --slurm] [--timeout S]\n"
	  "                    inventory and topology of this node or of many" },
	{ "bench", cmd_bench,
	  "bench OP [-n RANKS] [-b MIN] [-e MAX] [-f FACTOR] [--iters N] [-w WARMUP]\n"
	  "        [-c 0|1] [-d TYPE] [-o REDOP] [-a 0-3] [-N CYCLES] [--json]\n"
	  "                    collective benchmark in nccl-tests' columns" },
	{ "alloc", cmd_alloc,
	  "alloc -g N [--per-node K] [--link nvlink|same-numa|any] [--inventory F]\n"
	  "        [--explain] [...]\n"
	  "                    plan GPUs, CPUs and NICs for N ranks (see alloc -h)" },
	{ "gpus", cmd_gpus,
	  "gpus [--inventory F] [--lease-dir DIR]\n"
	  "                    every GPU of this node and who holds it" },
	{ "health", cmd_health,
	  "health [--level 1|2] [--seconds S] [--json]\n"
	  "                    per-GPU checks: driver state, bandwidth, burn" },
	{ "top", cmd_top,
	  "top [--once] [--json [--count N]] [--period MS]\n"
	  "        [--hosts EXPR | --hostfile F | --slurm] [--sort KEY] [--filter TEXT]\n"
	  "                    live view of GPUs, CPUs, memory and network (q quits)" },
	{ "exporter", cmd_exporter,
	  "exporter [--listen ADDR:PORT] [--period MS]\n"
	  "                    this node's telemetry for Prometheus (DCGM's names)" },
	{ "launch", cmd_launch,
	  "launch -n N [--per-node K] [--hosts EXPR | --hostfile F | --slurm]\n"
	  "        [--gpus-per-rank G] [--restarts R] [--time LIMIT] [--log-dir D] -- CMD\n"
	  "                    run N ranks of CMD (a .lua CMD: Lua ranks; see launch -h)" },
	{ "serve", cmd_serve,
	  "serve --port PORT [--replicas MIN-MAX] [--target N] [--health PATH]\n"
	  "        [--hosts EXPR | --hostfile F | --slurm] [--gpus-per-replica G] -- CMD\n"
	  "                    replicas of CMD behind HAProxy, restarted and scaled" },
	{ "jobs", cmd_jobs,
	  "jobs [--json]       this user's running jobs and services on this node" },
	{ "job", cmd_job,
	  "job status [--json] ID | stop ID | scale ID N | restart [--rolling] ID\n"
	  "                    one running job or service: its ranks or replicas; stop\n"
	  "                    it as Ctrl-C; a service's replicas scaled or restarted" },
	{ "exclude", cmd_exclude,
	  "exclude ls [--json] | add [--reason TEXT] EXPR | rm EXPR\n"
	  "                    the nodes herd launch leaves out, whatever the backend" },
	{ "trace", cmd_trace,
	  "trace [--json] [--calls N] FILE|DIR | --live JOB\n"
	  "                    the flight recorders of a job: who is missing from a call" },
	{ "acct", cmd_acct,
	  "acct [--since T] [--until T] [--json] [--log FILE]\n"
	  "                    the jobs herd launch ran, with GPU-hours, as sacct" },
	{ "hostlist", cmd_hostlist,
	  "hostlist expand EXPR | compress NAMES... | count EXPR\n"
	  "                    Slurm hostlist expressions, as scontrol prints them" },
	{ "ckpt", cmd_ckpt,
	  "ckpt ls|verify|inspect|diff|export|import DIR ...\n"
	  "                    list, verify, compare, export checkpoints (see ckpt -h)" },
	{ "bcast", cmd_bcast,
	  "bcast [--hosts EXPR | --hostfile F | --slurm] FILE DEST\n"
	  "                    copy a file to every node, verified, as sbcast" },
	{ "probe", cmd_probe,
	  "probe [--text | --json] [--watch [--period MS] [--count N]]\n"
	  "                    this node's inventory, for herd discover elsewhere;\n"
	  "                    --watch: its telemetry, a record per sample" },
	{ "k8s", cmd_k8s,
	  "k8s manifest [herd launch's options] -- CMD | node ... -- CMD\n"
	  "                    a job as Kubernetes objects; what each of their pods runs" },
	{ "exec", cmd_exec,
	  "exec --stdio | --connect HOST:PORT\n"
	  "                    the node-side helper herd launch starts on each node" },
	{ "help", NULL,
	  "help [COMMAND|env]  this help, COMMAND's (as herd COMMAND --help), or the\n"
	  "                    HERD_* environment variables" },
	{ NULL, NULL, NULL }
};

static void print_usage(FILE *out)
{
	fprintf(out,
		"usage: herd [options] [script [args]]\n"
		"       herd COMMAND [command options]\n"
		"Options:\n"
		"  -e stat           execute string 'stat'\n"
		"  -i                enter interactive mode after executing 'script'\n"
		"  -l mod            require library 'mod' into global 'mod'\n"
		"  -v, --version     show version information\n"
		"  -W                turn warnings on\n"
		"  -h, --help        show this help\n"
		"  --                stop handling options\n"
		"  -                 stop handling options and execute stdin\n"
		"Commands:\n");
	for (const struct command *c = commands; c->name; c++)
		fprintf(out, "  %s\n", c->usage);
	fprintf(out,
		"With no arguments herd is an interactive Lua shell when stdin is a\n"
		"terminal (exit, quit or Ctrl-D leaves it), and runs stdin as a script\n"
		"otherwise.  The shell keeps its history in $HERD_HISTORY, else\n"
		"${XDG_STATE_HOME:-~/.local/state}/herd/history.\n"
		"Exit status (each command's own: herd help COMMAND):\n"
		"  0    the script, code or shell ended without an error\n"
		"  1    a script raised an error or cannot be read, or a checkpoint\n"
		"       save still in flight at its end (or at os.exit(0)) failed\n"
		"  2    a usage error, or a first word that is neither a command nor\n"
		"       a file\n");
}

/* The version line; gpu adds what CUDA, driver and NCCL herd finds
 * (--version, not the REPL's banner). */
static void print_version(int gpu)
{
	char text[HERD_DEVICE_VERSIONS_LEN], nccl[HERD_COMM_NCCL_RUNTIME_LEN];

	printf("herd %s (libherd %s, %s)\n", HERD_VERSION_STRING, herd_version(),
	       LUA_RELEASE);
	if (gpu) {
		printf("GPU: %s\n", herd_device_versions(text));
		printf("NCCL for device calls: %s\n", herd_comm_nccl_runtime(nccl));
	}
	fflush(stdout);
}

/* Runs the chunk on top of the stack with no arguments. */
static int dochunk(lua_State *L, int status)
{
	if (status == LUA_OK)
		status = shell_docall(L, 0, 0);
	return shell_report(L, status);
}

static int dofile(lua_State *L, const char *name)
{
	return dochunk(L, luaL_loadfile(L, name));
}

static int dostring(lua_State *L, const char *s, const char *name)
{
	return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* require(name) into global name, as lua -l does (mod=name supported). */
static int dolibrary(lua_State *L, char *globname)
{
	char *modname = strchr(globname, '=');
	if (modname == NULL) {
		modname = globname;
	} else {
		*modname = '\0';
		modname++;
	}
	lua_getglobal(L, "require");
	lua_pushstring(L, modname);
	int status = shell_docall(L, 1, 1);
	if (status == LUA_OK)
		lua_setglobal(L, globname);
	return shell_report(L, status);
}

/* Pushes arg[1..n] for the script; returns n. */
static int pushargs(lua_State *L)
{
	if (lua_getglobal(L, "arg") != LUA_TTABLE)
		luaL_error(L, "'arg' is not a table");
	int n = (int)luaL_len(L, -1);
	luaL_checkstack(L, n + 3, "too many arguments to script");
	int i;
	for (i = 1; i <= n; i++)
		lua_rawgeti(L, -i, i);
	lua_remove(L, -i);
	return n;
}

static int handle_script(lua_State *L, char **argv)
{
	const char *fname = argv[0];
	if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
		fname = NULL; /* stdin */
	int status = luaL_loadfile(L, fname);
	if (status == LUA_OK) {
		int n = pushargs(L);
		status = shell_docall(L, n, LUA_MULTRET);
	}
	return shell_report(L, status);
}

/*
 * The global `arg`: arg[0] the script, arg[1..] its arguments, the
 * interpreter and its options at negative indices (as lua.c).
 */
static void createargtable(lua_State *L, char **argv, int argc, int script)
{
	if (script == argc)
		script = 0; /* no script name */
	int narg = argc - (script + 1);
	lua_createtable(L, narg > 0 ? narg : 0, script + 1);
	for (int i = 0; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_rawseti(L, -2, i - script);
	}
	lua_setglobal(L, "arg");
}

enum {
	HAS_ERROR = 1, /* bad option */
	HAS_I = 2,     /* -i */
	HAS_V = 4,     /* -v, --version */
	HAS_E = 8,     /* -e */
	HAS_HELP = 16  /* -h, --help */
};

/*
 * Scans the options before the script; *first receives the index of the
 * script (argc when none), or of the bad option on HAS_ERROR.
 */
static int collectargs(char **argv, int *first)
{
	int args = 0;
	int i;
	for (i = 1; argv[i] != NULL; i++) {
		*first = i;
		if (argv[i][0] != '-')
			return args; /* the script */
		switch (argv[i][1]) {
		case '-':
			if (strcmp(argv[i], "--help") == 0) {
				args |= HAS_HELP;
				break;
			}
			if (strcmp(argv[i], "--version") == 0) {
				args |= HAS_V;
				break;
			}
			if (argv[i][2] != '\0')
				return HAS_ERROR;
			*first = i + 1;
			return args;
		case '\0':
			return args; /* script "-" is stdin */
		case 'h':
			if (argv[i][2] != '\0')
				return HAS_ERROR;
			args |= HAS_HELP;
			break;
		case 'W':
			if (argv[i][2] != '\0')
				return HAS_ERROR;
			break;
		case 'i':
			args |= HAS_I; /* -i implies -v */
			/* fallthrough */
		case 'v':
			if (argv[i][2] != '\0')
				return HAS_ERROR;
			args |= HAS_V;
			break;
		case 'e':
			args |= HAS_E;
			/* fallthrough */
		case 'l':
			if (argv[i][2] == '\0') {
				i++;
				if (argv[i] == NULL || argv[i][0] == '-')
					return HAS_ERROR;
			}
			break;
		default:
			return HAS_ERROR;
		}
	}
	*first = i;
	return args;
}

/* Runs -e and -l in order; 0 when one failed. */
static int runargs(lua_State *L, char **argv, int n)
{
	for (int i = 1; i < n; i++) {
		int option = argv[i][1];
		if (option == 'e' || option == 'l') {
			char *extra = argv[i] + 2;
			if (*extra == '\0')
				extra = argv[++i];
			int status = option == 'e'
				? dostring(L, extra, "=(command line)")
				: dolibrary(L, extra);
			if (status != LUA_OK)
				return 0;
		} else if (option == 'W') {
			lua_warning(L, "@on", 0);
		}
	}
	return 1;
}

/*
 * os.exit([code]): as Lua's, but the state is always closed first, as
 * os.exit(code, true) does, so that every object's close path runs: a
 * checkpoint finishes its save in flight (or says why it failed), where
 * Lua's exit() without closing would end the process in the middle of it
 * and leave a temporary step behind.  A save that failed there turns an
 * exit status of 0 into 1.
 */
static int stdout_written(int status);

static int os_exit(lua_State *L)
{
	int status;

	if (lua_isboolean(L, 1))
		status = lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE;
	else
		status = (int)luaL_optinteger(L, 1, EXIT_SUCCESS);
	lua_close(L);
	if (status == EXIT_SUCCESS && lherd_ckpt_lost())
		status = SHELL_EXIT_FAILURE;
	exit(stdout_written(status));
}

/* Everything that touches Lua, in protected mode; pushes the exit status. */
static int pmain(lua_State *L)
{
	int argc = (int)lua_tointeger(L, 1);
	char **argv = (char **)lua_touserdata(L, 2);
	int script;
	int args = collectargs(argv, &script);
	luaL_checkversion(L);
	if (args == HAS_ERROR) {
		if ((argv[script][1] == 'e' || argv[script][1] == 'l') && argv[script][2] == '\0')
			fprintf(stderr, "herd: '%s' needs an argument (%s)\n", argv[script],
				argv[script][1] == 'e' ? "the Lua code to run" : "a module name");
		else
			fprintf(stderr, "herd: unrecognized option '%s'\n", argv[script]);
		fputs("Try 'herd --help' for more information.\n", stderr);
		lua_pushinteger(L, SHELL_EXIT_USAGE);
		return 1;
	}
	if (args & HAS_HELP) {
		print_usage(stdout);
		lua_pushinteger(L, SHELL_EXIT_OK);
		return 1;
	}
	if (args & HAS_V)
		print_version(!(args & HAS_I));
	luaL_openlibs(L);
	lua_getglobal(L, "os");
	lua_pushcfunction(L, os_exit);
	lua_setfield(L, -2, "exit");
	lua_pop(L, 1);
	luaL_requiref(L, "herd", luaopen_herd, 1);
	lua_pop(L, 1);
	createargtable(L, argv, argc, script);
	lua_gc(L, LUA_GCGEN, 0, 0);
	/* A failure returns no value: exit status 1. */
	if (!runargs(L, argv, script))
		return 0;
	if (script < argc && handle_script(L, argv + script) != LUA_OK)
		return 0;
	if (args & HAS_I) {
		shell_repl(L);
	} else if (script == argc && !(args & (HAS_E | HAS_V))) {
		if (isatty(STDIN_FILENO)) {
			print_version(0);
			shell_repl(L);
		} else if (dofile(L, NULL) != LUA_OK) {
			return 0;
		}
	}
	if (lherd_comm_finish(L) != HERD_OK) {
		shell_message(shell_progname, shell_last_error());
		return 0;
	}
	lua_pushinteger(L, SHELL_EXIT_OK);
	return 1;
}

static int run_lua(int argc, char **argv)
{
	lua_State *L = luaL_newstate();
	if (L == NULL) {
		shell_message(shell_progname, "cannot create state: not enough memory");
		return SHELL_EXIT_FAILURE;
	}
	lua_pushcfunction(L, pmain);
	lua_pushinteger(L, argc);
	lua_pushlightuserdata(L, argv);
	int status = lua_pcall(L, 2, 1, 0);
	int isnum = 0;
	int result = (int)lua_tointegerx(L, -1, &isnum);
	if (status != LUA_OK || !isnum)
		result = SHELL_EXIT_FAILURE;
	shell_report(L, status);
	lua_close(L);
	/* A checkpoint save that failed as the state closed (lua_ckpt.c). */
	if (result == SHELL_EXIT_OK && lherd_ckpt_lost())
		result = SHELL_EXIT_FAILURE;
	return result;
}

static const struct command *find_command(const char *name)
{
	for (const struct command *c = commands; c->name; c++)
		if (strcmp(name, c->name) == 0)
			return c;
	return NULL;
}

/* `herd help env`: the table of HERD_* variables, as docs/cli.md shows it. */
static int print_env(void)
{
	char *text = herd_env_table();

	if (text == NULL) {
		fputs("herd help env: out of memory\n", stderr);
		return SHELL_EXIT_FAILURE;
	}
	fputs(text, stdout);
	free(text);
	return SHELL_EXIT_OK;
}

/* The prefix of the running command's messages (shell_command). */
static char command[64];

/* `herd help [COMMAND|env]`. */
static int cmd_help(int argc, char **argv)
{
	const struct command *c;
	char help[] = "--help";
	char *args[] = { argv[1], help, NULL };

	if (argc < 2) {
		print_usage(stdout);
		return SHELL_EXIT_OK;
	}
	if (strcmp(argv[1], "env") == 0)
		return print_env();
	c = find_command(argv[1]);
	if (c != NULL && c->run == NULL) {
		print_usage(stdout);
		return SHELL_EXIT_OK;
	}
	if (c == NULL) {
		const char *near = shell_nearest(argv[1], &commands[0].name,
						 sizeof(commands) / sizeof(*commands) - 1,
						 sizeof(*commands));

		if (near != NULL)
			fprintf(stderr, "herd help: '%s' is not a command; did you mean '%s'?\n",
				argv[1], near);
		else
			fprintf(stderr, "herd help: '%s' is not a command\n"
				"Try 'herd help' for the list.\n", argv[1]);
		return SHELL_EXIT_USAGE;
	}
	snprintf(command, sizeof(command), "herd %s", c->name);
	shell_command = command;
	return c->run(2, args);
}

/*
 * A first word that is neither a command nor a file nor an option: a
 * mistyped command, most likely.  Says so (with the nearest command) and
 * returns 1; 0 when the word should run as a script.
 */
static int not_a_command(const char *word)
{
	const char *best;
	struct stat sb;

	if (word[0] == '-' || strchr(word, '/') != NULL || stat(word, &sb) == 0)
		return 0;
	best = shell_nearest(word, &commands[0].name, sizeof(commands) / sizeof(*commands) - 1,
			     sizeof(*commands));
	if (best != NULL)
		fprintf(stderr, "herd: '%s' is not a command or a file; did you mean '%s'?\n",
			word, best);
	else
		fprintf(stderr, "herd: '%s' is not a command or a file\n"
			"Try 'herd help' for the commands.\n", word);
	return 1;
}

/*
 * What every command printed must have reached its stdout: a full disk, a
 * closed or full device (`>/dev/full`) is said once, here, and a status of
 * 0 becomes 1, as coreutils' close_stdout does.
 */
static int stdout_written(int status)
{
	char msg[256];
	int e = fflush(stdout) != 0 ? errno : 0;

	if (e == 0 && !ferror(stdout))
		return status;
	snprintf(msg, sizeof(msg), "cannot write to standard output%s%s", e != 0 ? ": " : "",
		 e != 0 ? strerror(e) : "");
	shell_message(shell_command, msg);
	return status == SHELL_EXIT_OK ? SHELL_EXIT_FAILURE : status;
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		const struct command *c = find_command(argv[1]);

		if (c != NULL) {
			snprintf(command, sizeof(command), "herd %s", c->name);
			shell_command = command;
			return stdout_written(c->run != NULL ? c->run(argc - 1, argv + 1)
							     : cmd_help(argc - 1, argv + 1));
		}
		if (not_a_command(argv[1]))
			return SHELL_EXIT_USAGE;
	}
	return stdout_written(run_lua(argc, argv));
}
