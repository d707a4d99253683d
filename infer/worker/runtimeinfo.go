package worker

/*
#cgo LDFLAGS: -ldl
#include "ortapi.h"

enum {
	idxGetAvailableProviders = 125,
	idxReleaseAvailableProviders = 126,
};
typedef void *(*getAvailableProvidersFn)(char ***out, int *n);
typedef void *(*releaseAvailableProvidersFn)(char **ptr, int n);

// runtimeInfo loads the library at path (and leaves it loaded: ONNX Runtime is not made to
// be unloaded) and sets *version to its version and *providers to its execution providers,
// one per line, both to free. It returns NULL, or an error message to free; *version may be
// set even then.
static char *runtimeInfo(const char *path, char **version, char **providers) {
	*version = NULL;
	*providers = NULL;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) return strdup(dlerror());
	const apiBase *(*getApiBase)(void) = (const apiBase *(*)(void))dlsym(lib, "OrtGetApiBase");
	if (!getApiBase) return strdup("no OrtGetApiBase: not an ONNX Runtime library");
	const apiBase *base = getApiBase();
	*version = strdup(base->GetVersionString());
	const void *const *api = (const void *const *)base->GetApi(ortApiVersion);
	if (!api) return strdup("no OrtApi of version 24: ONNX Runtime 1.24 or later is needed");
	char **names = NULL;
	int n = 0;
	char *err = ortStatusMessage(api, ((getAvailableProvidersFn)api[idxGetAvailableProviders])(&names, &n));
	if (err) return err;
	size_t len = 1;
	for (int i = 0; i < n; i++) len += strlen(names[i]) + 1;
	char *out = calloc(len, 1);
	for (int i = 0; i < n; i++) {
		if (i > 0) strcat(out, "\n");
		strcat(out, names[i]);
	}
	*providers = out;
	free(ortStatusMessage(api, ((releaseAvailableProvidersFn)api[idxReleaseAvailableProviders])(names, n)));
	return NULL;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// RuntimeInfo loads the ONNX Runtime library at path, without creating an environment or a
// session, and returns its version and the execution providers built into it (as ONNX
// Runtime's GetAvailableProviders lists them, e.g. CUDAExecutionProvider and
// CPUExecutionProvider; whether a GPU provider then runs depends on the CUDA libraries and
// the device). `visiond version` prints them. The library stays loaded. The error names the
// library and what is wrong with it; version is set when the library could say it.
func RuntimeInfo(path string) (version string, providers []string, err error) {
	if path == "" {
		return "", nil, errors.New("onnxruntime library path is empty")
	}
	if _, err := os.Stat(path); err != nil {
		return "", nil, fmt.Errorf("onnxruntime library: %w", err)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cver, cprov *C.char
	cerr := C.runtimeInfo(cpath, &cver, &cprov)
	if cver != nil {
		version = C.GoString(cver)
		C.free(unsafe.Pointer(cver))
	}
	if cprov != nil {
		if s := C.GoString(cprov); s != "" {
			providers = strings.Split(s, "\n")
		}
		C.free(unsafe.Pointer(cprov))
	}
	if cerr != nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return version, nil, fmt.Errorf("onnxruntime library %s: %s", path, msg)
	}
	return version, providers, nil
}
