// The few OrtApi functions that onnxruntime_go does not wrap, called by their index in the
// OrtApi table. ONNX Runtime keeps that table ABI-stable (functions are only ever appended),
// so an index never changes; these were taken from onnxruntime_c_api.h with ORT_API_VERSION
// 24 (offsetof(OrtApi, F)/sizeof(void*)). Included by the cgo preambles of this package.
#ifndef VISIOND_ORTAPI_H
#define VISIOND_ORTAPI_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
	ortApiVersion = 24,
	idxGetErrorMessage = 2,
	idxCreateTensorWithDataAsOrtValue = 49,
	idxGetTensorMutableData = 51,
	idxCreateMemoryInfo = 68,
	idxReleaseStatus = 93,
	idxReleaseMemoryInfo = 94,
	idxReleaseValue = 96,
	idxBindInput = 136,
	idxBindOutput = 137,
	idxAddRunConfigEntry = 165,
};

typedef struct { const void *(*GetApi)(uint32_t); const char *(*GetVersionString)(void); } apiBase;
typedef const char *(*getErrorMessageFn)(void *status);
typedef void (*releaseStatusFn)(void *status);

// ortAPI returns the OrtApi table of the library at path, which must already be loaded
// (and stays loaded: onnxruntime_go never unloads it), or NULL.
static inline const void *const *ortAPI(const char *path) {
	void *lib = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	if (!lib) return NULL;
	const apiBase *(*getApiBase)(void) = (const apiBase *(*)(void))dlsym(lib, "OrtGetApiBase");
	const void *const *api = getApiBase ? (const void *const *)getApiBase()->GetApi(ortApiVersion) : NULL;
	dlclose(lib);
	return api;
}

// ortStatusMessage returns NULL for a NULL status, else a copy of its message to free, and
// releases the status.
static inline char *ortStatusMessage(const void *const *api, void *status) {
	if (!status) return NULL;
	char *err = strdup(((getErrorMessageFn)api[idxGetErrorMessage])(status));
	((releaseStatusFn)api[idxReleaseStatus])(status);
	return err;
}

#endif
