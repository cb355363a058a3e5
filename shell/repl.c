/*
 * shell/repl.c - the interactive loop, after lua.c's doREPL: a line is
 * first tried as `return <line>` so that expressions print their values; an
 * incomplete chunk (a syntax error at "<eof>") asks for more lines under the
 * continuation prompt; results are printed with herd.pretty.print.
 *
 * On a terminal, lines come from libedit through its readline-compatible
 * API, with history kept in a file and tab completion computed from the
 * live Lua state.  Otherwise the prompt is written to stdout and lines are
 * read plainly, so that a session can be driven through a pipe (herd -i).
 *
 * Ctrl-C: while code runs, shell_docall turns it into an error in that
 * code; at the prompt it discards the line (or the unfinished chunk) and
 * shows a new prompt.  Ctrl-D on an empty line ends the loop, as does exit
 * or quit typed alone; the banner says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>

#include "shell.h"

#define PROMPT "herd> "
#define PROMPT2 ">> "
#define HISTORY_MAX 1000

/* ---------------------------------------------------------- line reading */

static volatile sig_atomic_t prompt_interrupted;

static void on_prompt_sigint(int sig)
{
	(void)sig;
	prompt_interrupted = 1;
}

/* Line editing is used when stdin is a terminal. */
static int use_editline;

/* History file, or NULL when there is none to keep; warned about once. */
static char *history_path;
static int history_warned;

enum read_result { READ_LINE, READ_EOF, READ_INTERRUPTED };

/*
 * Reads one line without its newline into *out (malloc'd, freed by the
 * caller).  The result tells a line from the end of input and from Ctrl-C.
 */
static enum read_result read_line(const char *prompt, char **out)
{
	*out = NULL;
	prompt_interrupted = 0;
	if (use_editline) {
		char *line = readline(prompt);
		if (line == NULL) {
			if (prompt_interrupted) {
				fputc('\n', stdout);
				fflush(stdout);
				return READ_INTERRUPTED;
			}
			return READ_EOF;
		}
		*out = line;
		return READ_LINE;
	}
	fputs(prompt, stdout);
	fflush(stdout);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, stdin);
	if (n < 0) {
		free(line);
		if (prompt_interrupted) {
			clearerr(stdin);
			fputc('\n', stdout);
			fflush(stdout);
			return READ_INTERRUPTED;
		}
		return READ_EOF;
	}
	if (n > 0 && line[n - 1] == '\n')
		line[n - 1] = '\0';
	*out = line;
	return READ_LINE;
}

/* mkdir -p of the directories above path. */
static int make_parents(const char *path)
{
	char *dir = strdup(path);
	if (dir == NULL)
		return -1;
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			free(dir);
			return -1;
		}
		*p = '/';
	}
	free(dir);
	return 0;
}

/* $HERD_HISTORY, else ${XDG_STATE_HOME:-$HOME/.local/state}/herd/history. */
static char *find_history_path(void)
{
	const char *env = herd_env_get("HERD_HISTORY");
	if (env != NULL)
		return env[0] ? strdup(env) : NULL; /* empty: keep none */
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char *path = NULL;
	int n;
	if (state != NULL && state[0] == '/')
		n = asprintf(&path, "%s/herd/history", state);
	else if (home != NULL && home[0] != '\0')
		n = asprintf(&path, "%s/.local/state/herd/history", home);
	else
		return NULL;
	return n < 0 ? NULL : path;
}

static void history_warn(const char *what, int err)
{
	if (history_warned)
		return;
	history_warned = 1;
	fprintf(stderr, "herd: warning: cannot %s history file %s: %s\n", what,
		history_path, strerror(err));
}

/*
 * The history file is the user's, wherever a symbolic link leads it (a
 * dotfile kept elsewhere), but it must be a regular file: a FIFO would
 * hold the prompt in open, and a device keeps nothing.  A character
 * device (HERD_HISTORY=/dev/null, as HISTFILE=/dev/null does for a shell)
 * means none, quietly; anything else but a regular file is said once.
 */
static void history_open(void)
{
	struct stat sb;

	history_path = find_history_path();
	if (history_path == NULL)
		return;
	using_history();
	stifle_history(HISTORY_MAX);
	if (stat(history_path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		if (!S_ISCHR(sb.st_mode))
			fprintf(stderr, "herd: warning: history file %s is not a regular file "
				"(%s): no history is kept\n", history_path,
				S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISDIR(sb.st_mode) ? "a directory"
				: "a device or socket");
		free(history_path);
		history_path = NULL;
		return;
	}
	if (access(history_path, F_OK) == 0) {
		int err = read_history(history_path);
		if (err != 0)
			history_warn("read", err);
	} else if (make_parents(history_path) != 0) {
		history_warn("create the directory of", errno);
	}
}

/*
 * Writes the history to a new file beside the one a link leads to, made
 * here (owner-only, never through a link), and renames it over that one:
 * a shell that dies mid-write leaves the old history whole.  0 or an errno
 * value.
 */
static int history_write(void)
{
	char *real = realpath(history_path, NULL), *tmp = NULL;
	const char *target = real != NULL ? real : history_path;
	int fd, err = 0;

	if (asprintf(&tmp, "%s.tmp-%ld", target, (long)getpid()) < 0) {
		free(real);
		return ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		err = errno;
	else
		close(fd);
	/* libedit's write_history returns an errno value. */
	if (err == 0)
		err = write_history(tmp);
	if (err == 0 && rename(tmp, target) != 0)
		err = errno;
	if (err != 0 && fd >= 0)
		unlink(tmp);
	free(tmp);
	free(real);
	return err;
}

/*
 * Adds an entry and rewrites the file at once, so that history survives
 * however the shell ends.  A failure to write is a warning, given once.
 */
static void history_save(const char *line)
{
	if (!use_editline || line[0] == '\0')
		return;
	add_history(line);
	if (history_path == NULL)
		return;
	int err = history_write();
	if (err != 0)
		history_warn("write", err);
}

/* ----------------------------------------------------------- completion */

static lua_State *complete_L;

static const char *const lua_keywords[] = {
	"and", "break", "do", "else", "elseif", "end", "false", "for",
	"function", "goto", "if", "in", "local", "nil", "not", "or",
	"repeat", "return", "then", "true", "until", "while", NULL
};

static int is_ident_char(int c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/*
 * obj[key] for the value at idx, without running Lua code: raw access,
 * then the metatable's __index when it is a table, or a C function (the
 * herd objects' own).  A Lua __index function is not called, since
 * completion must not have side effects.  Pushes the value or nil.
 */
static void peek_index(lua_State *L, int idx, int key_idx)
{
	idx = lua_absindex(L, idx);
	key_idx = lua_absindex(L, key_idx);
	lua_pushvalue(L, idx);
	for (int depth = 0; depth < 8; depth++) {
		if (lua_istable(L, -1)) {
			lua_pushvalue(L, key_idx);
			if (lua_rawget(L, -2) != LUA_TNIL) {
				lua_remove(L, -2);
				return;
			}
			lua_pop(L, 1);
		}
		if (!lua_getmetatable(L, -1))
			break;
		lua_getfield(L, -1, "__index");
		lua_remove(L, -2); /* the metatable */
		if (lua_iscfunction(L, -1)) {
			lua_pushvalue(L, -2);
			lua_pushvalue(L, key_idx);
			if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
				lua_pop(L, 1);
				lua_pushnil(L);
			}
			lua_remove(L, -2);
			return;
		}
		lua_remove(L, -2); /* the previous object */
		if (!lua_istable(L, -1))
			break;
	}
	lua_pop(L, 1);
	lua_pushnil(L);
}

/* Records candidate prefix..key in the set at set_idx, if key matches. */
static void add_candidate(lua_State *L, int set_idx, const char *prefix,
			  const char *key, const char *partial, const char *kind)
{
	size_t plen = strlen(partial);
	if (strncmp(key, partial, plen) != 0)
		return;
	for (const char *p = key; *p; p++)
		if (!is_ident_char((unsigned char)*p))
			return;
	if (key[0] >= '0' && key[0] <= '9')
		return;
	lua_pushfstring(L, "%s%s", prefix, key);
	lua_pushstring(L, kind);
	lua_rawset(L, set_idx);
}

/* The string keys of the table at idx as candidates; methods_only keeps functions. */
static void add_table_keys(lua_State *L, int set_idx, int idx, const char *prefix,
			   const char *partial, int methods_only)
{
	idx = lua_absindex(L, idx);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		if (lua_type(L, -2) == LUA_TSTRING) {
			int t = lua_type(L, -1);
			const char *kind = t == LUA_TFUNCTION ? "function"
					 : t == LUA_TTABLE ? "table" : "value";
			if (!methods_only || t == LUA_TFUNCTION)
				add_candidate(L, set_idx, prefix, lua_tostring(L, -2),
					      partial, kind);
		}
		lua_pop(L, 1);
	}
}

/*
 * The members of the value on top of the stack: its keys when a table,
 * then along its metatables the keys of __index tables and of __members
 * (herd objects list their methods and fields there).
 */
static void add_members(lua_State *L, int set_idx, const char *prefix,
			const char *partial, int methods_only)
{
	lua_pushvalue(L, -1);
	for (int depth = 0; depth < 8; depth++) {
		if (lua_istable(L, -1))
			add_table_keys(L, set_idx, -1, prefix, partial, methods_only);
		if (!lua_getmetatable(L, -1))
			break;
		if (lua_getfield(L, -1, "__members") == LUA_TTABLE) {
			lua_pushnil(L);
			while (lua_next(L, -2)) {
				const char *kind = lua_tostring(L, -1);
				int method = kind && strcmp(kind, "method") == 0;
				if (lua_type(L, -2) == LUA_TSTRING && (!methods_only || method))
					add_candidate(L, set_idx, prefix, lua_tostring(L, -2),
						      partial, method ? "function" : "value");
				lua_pop(L, 1);
			}
		}
		lua_pop(L, 1);
		lua_getfield(L, -1, "__index");
		lua_remove(L, -2);
		lua_remove(L, -2);
		if (!lua_istable(L, -1))
			break;
	}
	lua_pop(L, 1);
}

/*
 * Evaluates the path of the text to complete, a name followed by .name or
 * [integer] parts, and pushes its value (nil when it cannot be reached).
 */
static void eval_path(lua_State *L, const char *s, size_t len)
{
	lua_pushglobaltable(L);
	size_t i = 0;
	int first = 1;
	while (i < len) {
		if (!first && s[i] == '.') {
			i++;
		} else if (!first && s[i] == '[') {
			size_t j = i + 1;
			lua_Integer v = 0;
			while (j < len && s[j] >= '0' && s[j] <= '9' && v < 1000000000)
				v = v * 10 + (s[j++] - '0');
			if (j == i + 1 || j >= len || s[j] != ']')
				goto fail;
			lua_pushinteger(L, v);
			peek_index(L, -2, -1);
			lua_remove(L, -2);
			lua_remove(L, -2);
			i = j + 1;
			continue;
		} else if (!first) {
			goto fail;
		}
		first = 0;
		size_t j = i;
		while (j < len && is_ident_char((unsigned char)s[j]))
			j++;
		if (j == i)
			goto fail;
		lua_pushlstring(L, s + i, j - i);
		peek_index(L, -2, -1);
		lua_remove(L, -2);
		lua_remove(L, -2);
		i = j;
	}
	return;
fail:
	lua_pop(L, 1);
	lua_pushnil(L);
}

/*
 * Protected part of completion: arg 1 the text.  Returns a table mapping
 * each candidate (the whole text completed) to its kind.
 */
static int collect_completions(lua_State *L)
{
	const char *text = luaL_checkstring(L, 1);
	size_t len = strlen(text);
	lua_newtable(L);
	int set_idx = lua_gettop(L);
	size_t sep = len;
	while (sep > 0 && is_ident_char((unsigned char)text[sep - 1]))
		sep--;
	const char *partial = text + sep;
	if (sep == 0) {
		lua_pushglobaltable(L);
		add_members(L, set_idx, "", partial, 0);
		lua_pop(L, 1);
		for (const char *const *k = lua_keywords; *k; k++)
			add_candidate(L, set_idx, "", *k, partial, "keyword");
		return 1;
	}
	char how = text[sep - 1];
	if (how != '.' && how != ':')
		return 1;
	eval_path(L, text, sep - 1);
	if (!lua_isnil(L, -1)) {
		lua_pushlstring(L, text, sep);
		const char *prefix = lua_tostring(L, -1);
		lua_insert(L, -2);
		add_members(L, set_idx, prefix, partial, how == ':');
	}
	lua_settop(L, set_idx);
	return 1;
}

static char **candidates;
static size_t ncandidates;

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_candidates(void)
{
	for (size_t i = 0; i < ncandidates; i++)
		free(candidates[i]);
	free(candidates);
	candidates = NULL;
	ncandidates = 0;
}

static char *candidate_generator(const char *text, int state)
{
	static size_t next;
	(void)text;
	if (state == 0)
		next = 0;
	if (next >= ncandidates)
		return NULL;
	return strdup(candidates[next++]);
}

/* rl_attempted_completion_function: names from the live Lua state. */
static char **repl_complete(const char *text, int start, int end)
{
	(void)start;
	(void)end;
	rl_attempted_completion_over = 1; /* never fall back to file names */
	rl_completion_append_character = '\0';
	lua_State *L = complete_L;
	free_candidates();
	int top = lua_gettop(L);
	if (!lua_checkstack(L, 8))
		return NULL;
	lua_pushcfunction(L, collect_completions);
	lua_pushstring(L, text);
	if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
		lua_settop(L, top);
		return NULL;
	}
	size_t cap = 0;
	const char *only_kind = NULL;
	lua_pushnil(L);
	while (lua_next(L, -2)) {
		if (ncandidates == cap) {
			cap = cap ? cap * 2 : 16;
			char **grown = realloc(candidates, cap * sizeof(*grown));
			if (grown == NULL)
				break;
			candidates = grown;
		}
		char *s = strdup(lua_tostring(L, -2));
		if (s == NULL)
			break;
		candidates[ncandidates++] = s;
		only_kind = lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	/* A single function is completed with its opening parenthesis. */
	if (ncandidates == 1 && only_kind && strcmp(only_kind, "function") == 0)
		rl_completion_append_character = '(';
	lua_settop(L, top);
	if (ncandidates == 0)
		return NULL;
	qsort(candidates, ncandidates, sizeof(*candidates), compare_strings);
	return rl_completion_matches(text, candidate_generator);
}

/* Completion words run across names, dots, colons and [index] parts. */
static char word_breaks[] = " \t\n\"\\'`@$><=;|&{(,+-*/%^~#!}";

static void editline_init(lua_State *L)
{
	complete_L = L;
	rl_readline_name = "herd";
	rl_attempted_completion_function = repl_complete;
	rl_basic_word_break_characters = word_breaks;
	rl_completer_word_break_characters = word_breaks;
	history_open();
}

/* -------------------------------------------------------------- the loop */

/* _PROMPT / _PROMPT2 when the user set them, as lua.c allows. */
static const char *get_prompt(lua_State *L, int firstline)
{
	if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
		lua_pop(L, 1);
		lua_pushstring(L, firstline ? PROMPT : PROMPT2);
	}
	const char *p = luaL_tolstring(L, -1, NULL);
	lua_remove(L, -2);
	return p;
}

/* Pushes the next line; READ_EOF / READ_INTERRUPTED push nothing. */
static enum read_result pushline(lua_State *L, int firstline)
{
	const char *prompt = get_prompt(L, firstline);
	char *line;
	enum read_result r = read_line(prompt, &line);
	lua_pop(L, 1); /* the prompt */
	if (r != READ_LINE)
		return r;
	/* "=expr" reads as "return expr", for compatibility with Lua 5.2. */
	if (firstline && line[0] == '=')
		lua_pushfstring(L, "return %s", line + 1);
	else
		lua_pushstring(L, line);
	free(line);
	return READ_LINE;
}

/* Tries the line on the stack as `return <line>;`. */
static int addreturn(lua_State *L)
{
	const char *line = lua_tostring(L, -1);
	const char *retline = lua_pushfstring(L, "return %s;", line);
	int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
	if (status == LUA_OK) {
		lua_remove(L, -2); /* the modified line */
		history_save(line);
	} else {
		lua_pop(L, 2); /* the error and the modified line */
	}
	return status;
}

/* A syntax error at the end of the input: the chunk is unfinished. */
static int incomplete(lua_State *L, int status)
{
	if (status == LUA_ERRSYNTAX) {
		size_t lmsg;
		const char *msg = lua_tolstring(L, -1, &lmsg);
		static const char eof[] = "<eof>";
		size_t leof = sizeof(eof) - 1;
		if (lmsg >= leof && strcmp(msg + lmsg - leof, eof) == 0) {
			lua_pop(L, 1);
			return 1;
		}
	}
	return 0;
}

/* Outcomes of loadline beyond Lua's status codes. */
#define LINE_EOF (-1)
#define LINE_DISCARDED (-2)
#define LINE_QUIT (-3)

/*
 * Whether the first line of a chunk asks to leave: exit or quit alone (or
 * called, exit()), as Python's and psql's users type it, unless the
 * script made a global of that name, which then reads as itself.
 */
static int is_quit(lua_State *L, const char *line)
{
	static const char *const words[] = { "exit", "quit", NULL };
	size_t len;
	int taken;

	line += strspn(line, " \t");
	len = strlen(line);
	while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (len > 2 && line[len - 2] == '(' && line[len - 1] == ')')   /* called */
		len -= 2;
	for (const char *const *w = words; *w; w++) {
		if (strlen(*w) != len || strncmp(line, *w, len) != 0)
			continue;
		/* raw: a strict _G's __index must not raise here */
		lua_pushglobaltable(L);
		lua_pushlstring(L, line, 4);
		taken = lua_rawget(L, -2) != LUA_TNIL;
		lua_pop(L, 2);
		return !taken;
	}
	return 0;
}

/* Reads lines until the chunk compiles or fails for another reason than <eof>. */
static int multiline(lua_State *L)
{
	for (;;) {
		size_t len;
		const char *line = lua_tolstring(L, 1, &len);
		int status = luaL_loadbuffer(L, line, len, "=stdin");
		if (!incomplete(L, status)) {
			history_save(line);
			return status;
		}
		enum read_result r = pushline(L, 0);
		if (r == READ_INTERRUPTED)
			return LINE_DISCARDED;
		if (r == READ_EOF) {
			/* Ctrl-D inside a chunk: report it as the error it is. */
			if (use_editline)
				fputc('\n', stdout);
			history_save(line);
			return luaL_loadbuffer(L, line, len, "=stdin");
		}
		lua_pushliteral(L, "\n");
		lua_insert(L, -2);
		lua_concat(L, 3);
	}
}

/*
 * Reads a chunk and leaves it compiled on the stack (or its error).
 * Returns the load status, LINE_EOF or LINE_DISCARDED.
 */
static int loadline(lua_State *L)
{
	lua_settop(L, 0);
	enum read_result r = pushline(L, 1);
	if (r == READ_EOF)
		return LINE_EOF;
	if (r == READ_INTERRUPTED)
		return LINE_DISCARDED;
	if (is_quit(L, lua_tostring(L, 1))) {
		history_save(lua_tostring(L, 1));
		lua_settop(L, 0);
		return LINE_QUIT;
	}
	int status = addreturn(L);
	if (status != LUA_OK)
		status = multiline(L);
	if (status == LINE_DISCARDED) {
		lua_settop(L, 0);
		return status;
	}
	lua_remove(L, 1); /* the line */
	return status;
}

/* Prints the values on the stack through herd.pretty.print. */
static void l_print(lua_State *L)
{
	int n = lua_gettop(L);
	if (n == 0)
		return;
	luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
	lua_getglobal(L, "require");
	lua_pushliteral(L, "herd.pretty");
	if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
		lua_getfield(L, -1, "print");
		lua_remove(L, -2);
	} else {
		lua_pop(L, 1);
		lua_getglobal(L, "print");
	}
	lua_insert(L, 1);
	if (lua_pcall(L, n, 0, 0) != LUA_OK)
		shell_message(shell_progname,
			      lua_pushfstring(L, "error calling 'print' (%s)",
					      lua_tostring(L, -1)));
}

void shell_repl(lua_State *L)
{
	const char *oldprogname = shell_progname;
	shell_progname = NULL; /* no program name on errors at the prompt */
	use_editline = isatty(STDIN_FILENO);
	if (use_editline)
		editline_init(L);
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_prompt_sigint;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: Ctrl-C must end the read that waits for a line. */
	sigaction(SIGINT, &sa, &old);

	fputs("Type help() for help, help(name) for one entry, exit or Ctrl-D to leave.\n",
	      stdout);
	fflush(stdout);
	int status;
	while ((status = loadline(L)) != LINE_EOF && status != LINE_QUIT) {
		if (status == LINE_DISCARDED)
			continue;
		if (status == LUA_OK)
			status = shell_docall(L, 0, LUA_MULTRET);
		if (status == LUA_OK)
			l_print(L);
		else
			shell_report(L, status);
	}
	sigaction(SIGINT, &old, NULL);
	lua_settop(L, 0);
	/* Ctrl-D leaves the cursor after the prompt; on a terminal, exit
	 * leaves it on a line of its own already */
	if (status == LINE_EOF || !use_editline)
		fputc('\n', stdout);
	fflush(stdout);
	free_candidates();
	free(history_path);
	history_path = NULL;
	shell_progname = oldprogname;
}
