package main

import (
	"bufio"
	"debug/buildinfo"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	ort "github.com/yalue/onnxruntime_go"
	"gocv.io/x/gocv"
)

// loadAvg is the host's load average when a result was taken: the bench shares the box.
type loadAvg struct {
	One, Five, Fifteen float64
}

func readLoad() loadAvg {
	var l loadAvg
	data, _ := os.ReadFile("/proc/loadavg")
	fmt.Sscan(string(data), &l.One, &l.Five, &l.Fifteen)
	return l
}

// envInfo is the machine and the versions a run measured.
type envInfo struct {
	Taken     time.Time         `json:"taken"`
	Host      string            `json:"host"`
	OS        string            `json:"os"`
	Kernel    string            `json:"kernel"`
	CPU       string            `json:"cpu"`
	CPUs      int               `json:"cpus"` // online CPUs this process may use
	MemoryGiB float64           `json:"memory_gib"`
	GPU       string            `json:"gpu,omitempty"`
	Load      loadAvg           `json:"load"`
	Versions  map[string]string `json:"versions"`
}

func envCmd(args []string) error {
	fs := flag.NewFlagSet("env", flag.ContinueOnError)
	out := fs.String("o", "-", "output JSON")
	bin := fs.String("visiond", "bin/visiond", "the visiond binary (its module versions are read)")
	lib := fs.String("library", libDefault(), "libonnxruntime.so (its version is read)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	e := envInfo{Taken: time.Now(), CPUs: runtime.NumCPU(), Load: readLoad(), Versions: map[string]string{}}
	e.Host, _ = os.Hostname()
	e.Kernel = firstLine(readFile("/proc/sys/kernel/osrelease"))
	e.OS = osRelease()
	e.CPU = cpuModel()
	if kb := meminfo("MemTotal"); kb > 0 {
		e.MemoryGiB = float64(kb) / (1 << 20)
	}
	if out, err := exec.Command("nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader").Output(); err == nil {
		e.GPU = strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; ")), " ")
	}
	v := e.Versions
	if out, err := exec.Command("go", "version").Output(); err == nil {
		v["go"] = strings.TrimPrefix(strings.TrimSpace(string(out)), "go version ")
	}
	v["go (visiond-bench built with)"] = runtime.Version()
	if bi, err := buildinfo.ReadFile(*bin); err == nil {
		v["go (visiond built with)"] = bi.GoVersion
		for _, dep := range bi.Deps {
			switch dep.Path {
			case "github.com/nats-io/nats-server/v2":
				v["nats-server (embedded in visiond)"] = dep.Version
			case "github.com/yalue/onnxruntime_go":
				v["onnxruntime_go"] = dep.Version
			case "gocv.io/x/gocv":
				v["gocv"] = dep.Version
			case "github.com/bluenviron/gortsplib/v4":
				v["gortsplib"] = dep.Version
			}
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v["commit (visiond built from)"] = s.Value
			}
		}
	} else {
		v["visiond"] = "not readable: " + err.Error()
	}
	v["opencv"] = gocv.OpenCVVersion()
	if *lib != "" {
		if _, err := os.Stat(*lib); err == nil {
			ort.SetSharedLibraryPath(*lib)
			if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err == nil {
				v["onnxruntime"] = ort.GetVersion()
				_ = ort.DestroyEnvironment()
			} else {
				v["onnxruntime"] = "not loadable: " + err.Error()
			}
		}
	}
	if out, err := exec.Command("ffmpeg", "-version").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(l, "ffmpeg version "):
				v["ffmpeg"] = strings.Fields(l)[2]
			case strings.HasPrefix(l, "libavcodec "):
				v["libavcodec"] = strings.Join(strings.Fields(strings.Split(l, "/")[0])[1:], "")
			}
		}
	}
	if out, err := exec.Command("nats-server", "--version").Output(); err == nil {
		v["nats-server (Debian, used by the tests)"] = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		c := strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			c += " (with uncommitted changes)"
		}
		v["commit"] = c
	}
	return writeJSON(*out, e)
}

func libDefault() string {
	if l := os.Getenv("ONNXRUNTIME_SHARED_LIBRARY_PATH"); l != "" {
		return l
	}
	return "third_party/libonnxruntime.so.1"
}

func readFile(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

func osRelease() string {
	for _, l := range strings.Split(readFile("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

func cpuModel() string {
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// meminfo returns a /proc/meminfo field in kB.
func meminfo(key string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) >= 2 && fl[0] == key+":" {
			v, _ := strconv.ParseInt(fl[1], 10, 64)
			return v
		}
	}
	return 0
}
