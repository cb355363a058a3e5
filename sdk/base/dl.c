/*
 * sdk/base/dl.c - libraries loaded at run time, so that libherd runs where
 * they are absent (no NVIDIA driver, no NCCL) and says why a feature is.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base.h"

void herd__dl_forget(void)
{
	/* The first call hands out the message, a second frees it. */
	if (dlerror() != NULL)
		(void)dlerror();
}

void *herd__dl_open(const char *lib, const herd__dl_symbol *syms, size_t n, void *api,
		    char *why, size_t cap)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (h == NULL) {
		const char *err = dlerror();

		/* dlerror names the library: "libX.so.1: cannot open shared
		 * object file: No such file or directory" */
		if (err != NULL)
			snprintf(why, cap, "%s", err);
		else
			snprintf(why, cap, "%s: cannot be loaded", lib);
		herd__dl_forget();
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		void *sym = dlsym(h, syms[i].name);

		if (sym == NULL && syms[i].required) {
			snprintf(why, cap, "%s lacks %s", lib, syms[i].name);
			dlclose(h);
			herd__dl_forget();
			return NULL;
		}
		/* POSIX guarantees a data pointer from dlsym converts to a
		 * function pointer; memcpy says so without a cast ISO C lacks. */
		memcpy((char *)api + syms[i].offset, &sym, sizeof(sym));
	}
	herd__dl_forget();   /* an optional symbol missing */
	return h;
}
