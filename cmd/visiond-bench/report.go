package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// reportCmd writes BENCHMARKS.md from the raw results of scripts/bench/run.sh (-in) and,
// when given, of scripts/gpu/bench.sh on the GPU machine (-gpu). It copies each soak plot
// next to the report. Every figure comes from those files; a part that did not run says so.
func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	in := fs.String("in", "build/bench", "results of scripts/bench/run.sh")
	gpu := fs.String("gpu", "", "results of scripts/gpu/bench.sh (the GPU machine's $OUT), if any")
	out := fs.String("o", "BENCHMARKS.md", "the report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r := &report{out: *out}
	if old, err := os.ReadFile(*out); err == nil {
		r.kept = handSections(string(old))
	}
	local, err := loadRun(*in, "cpu")
	if err != nil {
		return err
	}
	r.runs = append(r.runs, local)
	if *gpu != "" {
		g, err := loadRun(*gpu, "gpu")
		if err != nil {
			return err
		}
		r.runs = append(r.runs, g)
	}
	text, err := r.write()
	if err != nil {
		return err
	}
	return os.WriteFile(*out, []byte(text), 0o644)
}

// run is the results of one machine.
type run struct {
	tag, dir   string
	env, end   *envInfo
	commands   []string
	calls      []time.Time // when each call of scripts/gpu/bench.sh began, from its commands-<UTC time>.txt
	knobs      map[string]string
	decode     []benchLine
	skip       []benchLine // BenchmarkSkipNonRef (skip.go)
	pipeline   []benchLine
	scale      *scaleResult            // scale.json: the reference of overload and soak
	scales     map[string]*scaleResult // every scale*.json and peer-scale.json, by name without .json
	overload   *overloadResult
	soak       *soakResult
	peerPlain  map[string]any
	peerLatest map[string]any
	peerD      *measureResult            // visiond against the peer: the daemon's default workers
	peerAlt    []*measureResult          // visiond against the peer in other configurations (peer-visiond-*.json)
	holds      map[string]*measureResult // hold-*.json, by name without .json
	selftest   string
	failed     map[string]string // part -> why
	soakPNG    string
}

// laterScales are the run's scale searches that started after its last bench.sh call (made by
// another script), by start.
func (ru *run) laterScales() []string {
	if len(ru.calls) == 0 {
		return nil
	}
	last := ru.calls[len(ru.calls)-1]
	var ks []string
	for k, s := range ru.scales {
		if s.Started.After(last.Add(12 * time.Hour)) {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool { return ru.scales[ks[i]].Started.Before(ru.scales[ks[j]].Started) })
	return ks
}

// benchLine is one `go test -bench` result line, with an optional "k=v k=v: " prefix.
type benchLine struct {
	name    string
	prefix  map[string]string
	metrics map[string]float64
}

func parseBench(text string) []benchLine {
	var out []benchLine
	for _, l := range strings.Split(text, "\n") {
		bl := benchLine{prefix: map[string]string{}, metrics: map[string]float64{}}
		if i := strings.Index(l, ": Benchmark"); i >= 0 {
			for _, kv := range strings.Fields(l[:i]) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					bl.prefix[k] = v
				}
			}
			l = l[i+2:]
		}
		if !strings.HasPrefix(l, "Benchmark") {
			continue
		}
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		bl.name = f[0]
		if i := strings.LastIndexByte(bl.name, '-'); i > 0 { // the GOMAXPROCS suffix
			if _, err := strconv.Atoi(bl.name[i+1:]); err == nil {
				bl.name = bl.name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				bl.metrics[f[i+1]] = v
			}
		}
		out = append(out, bl)
	}
	return out
}

func loadRun(dir, tag string) (*run, error) {
	r := &run{tag: tag, dir: dir, failed: map[string]string{}, knobs: map[string]string{}}
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	var e envInfo
	if readJSON(filepath.Join(dir, "env.json"), &e) == nil {
		r.env = &e
	}
	var e2 envInfo
	if readJSON(filepath.Join(dir, "env-end.json"), &e2) == nil {
		r.end = &e2
	}
	cmdFiles, _ := filepath.Glob(filepath.Join(dir, "commands*.txt")) // bench.sh writes one per call
	sort.Strings(cmdFiles)
	var cmdText string
	for _, f := range cmdFiles {
		cmdText += readFile(f) + "\n"
		if t, err := time.Parse("20060102T150405", strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "commands-"), ".txt")); err == nil {
			r.calls = append(r.calls, t)
		}
	}
	for _, l := range strings.Split(cmdText, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(l, "# knob ") {
			r.knobs[strings.TrimPrefix(k, "# knob ")] = v
			continue
		}
		r.commands = append(r.commands, l)
	}
	r.decode = parseBench(readFile(filepath.Join(dir, "decode.txt")))
	r.skip = parseBench(readFile(filepath.Join(dir, "skip.txt")))
	r.pipeline = parseBench(readFile(filepath.Join(dir, "pipeline.txt")))
	r.scales = map[string]*scaleResult{}
	scaleFiles, _ := filepath.Glob(filepath.Join(dir, "scale*.json"))
	for _, f := range append(scaleFiles, filepath.Join(dir, keyPeer+".json")) {
		var s scaleResult
		if readJSON(f, &s) == nil {
			r.scales[strings.TrimSuffix(filepath.Base(f), ".json")] = &s
		}
	}
	r.scale = r.scales["scale"]
	r.holds = map[string]*measureResult{}
	holdFiles, _ := filepath.Glob(filepath.Join(dir, holdPrefix+"*.json"))
	for _, f := range holdFiles {
		var m measureResult
		if readJSON(f, &m) == nil {
			r.holds[strings.TrimSuffix(filepath.Base(f), ".json")] = &m
		}
	}
	var o overloadResult
	if readJSON(filepath.Join(dir, "overload.json"), &o) == nil {
		r.overload = &o
	}
	var k soakResult
	if readJSON(filepath.Join(dir, "soak.json"), &k) == nil {
		r.soak = &k
	}
	if _, err := os.Stat(filepath.Join(dir, "soak.png")); err == nil {
		r.soakPNG = filepath.Join(dir, "soak.png")
	}
	var pp, pl map[string]any
	if readJSON(filepath.Join(dir, "peer-plain.json"), &pp) == nil {
		r.peerPlain = pp
	}
	if readJSON(filepath.Join(dir, "peer-latest.json"), &pl) == nil {
		r.peerLatest = pl
	}
	var pd measureResult
	if readJSON(filepath.Join(dir, "peer-visiond.json"), &pd) == nil {
		r.peerD = &pd
	}
	alts, _ := filepath.Glob(filepath.Join(dir, "peer-visiond-*.json"))
	for _, a := range alts {
		var m measureResult
		if readJSON(a, &m) == nil {
			r.peerAlt = append(r.peerAlt, &m)
		}
	}
	r.selftest = strings.TrimSpace(readFile(filepath.Join(dir, "selftest.txt")))
	matches, _ := filepath.Glob(filepath.Join(dir, "*.failed"))
	for _, m := range matches {
		r.failed[strings.TrimSuffix(filepath.Base(m), ".failed")] = strings.TrimSpace(readFile(m))
	}
	return r, nil
}

type report struct {
	out  string
	runs []*run
	kept []string // the sections written by hand in the file being rewritten (handSections)
	b    strings.Builder
}

// imgDir holds the report's plots, relative to the report (BENCHMARKS.md at the repository
// root: docs/img).
const imgDir = "docs/img"

// imgPath returns where the report's plot name is written, made ready, and the report's
// link to it.
func (r *report) imgPath(name string) (path, link string, err error) {
	dir := filepath.Join(filepath.Dir(r.out), imgDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	return filepath.Join(dir, name), imgDir + "/" + name, nil
}

// handMark opens a section written by hand: the report keeps such sections of the file it
// rewrites, in their order, before "How to reproduce".
const handMark = "*Written by hand"

// handSections returns the "## " sections of a report whose first line after the heading
// (blank lines skipped) begins with handMark, each whole: heading to the next "## " heading.
func handSections(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "## ") {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j >= len(lines) || !strings.HasPrefix(lines[j], handMark) {
			continue
		}
		end := i + 1
		inCode := false
		for ; end < len(lines); end++ {
			if strings.HasPrefix(lines[end], "```") {
				inCode = !inCode
			}
			if !inCode && strings.HasPrefix(lines[end], "## ") {
				break
			}
		}
		out = append(out, strings.TrimRight(strings.Join(lines[i:end], "\n"), "\n")+"\n")
		i = end - 1
	}
	return out
}

func (r *report) p(format string, args ...any) { fmt.Fprintf(&r.b, format+"\n", args...) }

func (r *report) table(head []string, rows [][]string) {
	r.p("| %s |", strings.Join(head, " | "))
	seps := make([]string, len(head))
	for i := range seps {
		seps[i] = "---"
	}
	r.p("|%s|", strings.Join(seps, "|"))
	for _, row := range rows {
		r.p("| %s |", strings.Join(row, " | "))
	}
	r.p("")
}

func f0(v float64) string { return fmtF(v, 0) }
func f1(v float64) string { return fmtF(v, 1) }
func f2(v float64) string { return fmtF(v, 2) }
func f3(v float64) string { return fmtF(v, 3) }

func fmtF(v float64, d int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

func num(m map[string]any, k string) float64 {
	if v, ok := m[k].(float64); ok {
		return v
	}
	return math.NaN()
}

func str(m map[string]any, k string) string {
	if v, ok := m[k]; ok {
		return fmt.Sprint(v)
	}
	return ""
}

func (ru *run) name() string {
	if ru.env == nil {
		return ru.tag
	}
	if ru.env.GPU != "" {
		return fmt.Sprintf("GPU machine (%d CPUs, %s)", ru.env.CPUs, strings.SplitN(ru.env.GPU, ",", 2)[0])
	}
	return fmt.Sprintf("%d-CPU box", ru.env.CPUs)
}

func (ru *run) loadNote() string {
	if ru.env == nil {
		return ""
	}
	s := fmt.Sprintf("load average %.1f at the start", ru.env.Load.One)
	if ru.end != nil {
		s += fmt.Sprintf(", %.1f at the end", ru.end.Load.One)
	}
	return s
}

func (r *report) write() (string, error) {
	local := r.runs[0]
	var gpu *run
	if len(r.runs) > 1 {
		gpu = r.runs[1]
	}
	taken := "an unknown date"
	if local.env != nil {
		taken = local.env.Taken.UTC().Format("2006-01-02 15:04 UTC")
	}
	r.p("# visiond benchmarks")
	r.p("")
	r.p("Written by `make bench` (`scripts/bench/run.sh`, then `bin/visiond-bench report`) from the run of %s;", taken)
	if gpu != nil && gpu.env != nil {
		if c := gpu.calls; len(c) > 1 && c[len(c)-1].Sub(c[0]) > 12*time.Hour {
			// Parts rerun on another day keep the older parts' results beside them: say so.
			r.p("the GPU machine's figures come from `scripts/gpu/bench.sh`, run there in %d calls from %s to %s (its environment read on %s), merged from their raw output;",
				len(c), c[0].Format("2006-01-02 15:04"), c[len(c)-1].Format("2006-01-02 15:04 UTC"), gpu.env.Taken.UTC().Format("2006-01-02 15:04 UTC"))
			r.p("each part's figures come from one call (the commands of each call, with its time, are in the GPU results' commands-*.txt and under How to reproduce).")
		} else {
			r.p("the GPU machine's figures come from `scripts/gpu/bench.sh`, run there on %s, merged from its raw output.", gpu.env.Taken.UTC().Format("2006-01-02 15:04 UTC"))
		}
		if late := gpu.laterScales(); len(late) > 0 {
			r.p("%d of its scale searches (%s) started after those calls, from `scripts/gpu/daemon.sh`, %s to %s; each has its command in it (below, with each setup);",
				len(late), strings.Join(late, ", "), gpu.scales[late[0]].Started.UTC().Format("2006-01-02 15:04"), gpu.scales[late[len(late)-1]].Started.UTC().Format("2006-01-02 15:04 UTC"))
		}
		if len(gpu.holds) > 0 {
			r.p("and its hold results (%s) are single `visiond-bench measure` runs of that script, each in one call;", strings.Join(gpu.holdKeys(), ", "))
		}
	} else {
		r.p("no GPU machine's results were given (`make bench GPU=DIR`), so its rows say \"not run\".")
	}
	r.p("Every figure below is read from that run's raw output; every ratio compares two things measured side by side in the same run,")
	r.p("on the same machine, streams and model. Nothing here is typed in by hand: rerun `make bench` and this file is rewritten.")
	r.p("")
	r.summary(local, gpu)
	r.machines()
	r.decodeSection(local)
	r.skipSection(local)
	r.pipelineSection()
	r.peerSection(gpu)
	if err := r.camerasSection(); err != nil {
		return "", err
	}
	r.scaleSection()
	r.overloadSection()
	if err := r.soakSection(); err != nil {
		return "", err
	}
	r.memorySection(local)
	r.crowdSection(local)
	r.vtestSection(local)
	r.clipsSection(local)
	r.liveSection(local)
	for _, k := range r.kept {
		r.p("%s", k)
	}
	r.commandsSection()
	return r.b.String(), nil
}

func (r *report) summary(local, gpu *run) {
	r.p("## Summary")
	r.p("")
	var rows [][]string
	// decode
	if len(local.decode) > 0 {
		var ratios []float64
		for _, b := range local.decode {
			if v, ok := b.metrics["ratio"]; ok {
				ratios = append(ratios, v)
			}
		}
		if len(ratios) > 0 {
			rows = append(rows, []string{"decode: CPU per frame, visiond ÷ `ffmpeg -threads 1 -f null`", local.name(),
				fmt.Sprintf("%s to %s over %d streams (below 1: visiond cheaper)", f2(slices.Min(ratios)), f2(slices.Max(ratios)), len(ratios))})
		}
	} else {
		rows = append(rows, []string{"decode", local.name(), r.notRun(local, "decode")})
	}
	rows = append(rows, r.skipSummary(local)...)
	for _, ru := range r.runs {
		for _, b := range ru.pipeline {
			sessions := "1" // lines from before sessions per worker: one each
			if n := b.metrics["sessions"]; n > 0 {
				sessions = f0(n)
			}
			rows = append(rows, []string{fmt.Sprintf("pipeline: detections/s through the daemon ÷ bare `Detect` loops (workers=%s, sessions=%s, threads=%s, cameras=%s, %s, decoder %s)",
				b.prefix["workers"], sessions, or(b.prefix["threads"], "default"), b.prefix["cameras"], b.prefix["provider"], or(b.prefix["decoder"], "cpu")), ru.name(),
				fmt.Sprintf("%s (%s ÷ %s per second)", f2(b.metrics["ratio"]), f1(b.metrics["daemon-events/s"]), f1(b.metrics["bare-runs/s"]))})
		}
		if len(ru.pipeline) == 0 && (ru.tag == "cpu" || ru.failed["pipeline"] != "") {
			rows = append(rows, []string{"pipeline", ru.name(), r.notRun(ru, "pipeline")})
		}
	}
	if gpu != nil && gpu.peerD != nil && gpu.peerPlain != nil && fakePeer(gpu.peerPlain) {
		rows = append(rows, []string{"peer", gpu.name(), "fake session (peer.py --fake-output): no figure"})
	} else if gpu != nil && gpu.peerD != nil && gpu.peerPlain != nil {
		pf := num(gpu.peerPlain, "frames_per_s")
		rows = append(rows, []string{fmt.Sprintf("peer: frames analysed/s, visiond ÷ Python + OpenCV + ONNX Runtime loop (%d cameras, CPU %s)", gpu.peerD.Cameras, gpu.peerD.Daemon.CPUs),
			gpu.name(), fmt.Sprintf("%s (%s ÷ %s); CPU per frame %s ÷ %s ms", f2(gpu.peerD.Window.EventsPerSec/pf), f1(gpu.peerD.Window.EventsPerSec), f1(pf),
				f1(gpu.peerD.CPUPerFrameMS), f1(num(gpu.peerPlain, "cpu_ms_per_frame")))})
	} else {
		why := "not run: needs Python's onnxruntime (the GPU machine's image has it): `scripts/gpu/bench.sh peer`"
		if gpu != nil {
			why = r.notRun(gpu, "peer")
		}
		rows = append(rows, []string{"peer: visiond ÷ Python + OpenCV + ONNX Runtime loop", "GPU machine's CPU", why})
	}
	rows = append(rows, r.cameraRows()...)
	for _, ru := range r.runs {
		if s := ru.scale; s != nil {
			rows = append(rows, []string{fmt.Sprintf("scale: cameras sustained at %g fps with p99 capture-to-publish < %g ms (%s)",
				s.Criterion.FPS, s.Criterion.P99MS, setup(s)), ru.name(),
				sustained(s)})
		} else if ru.tag == "cpu" || ru.failed["scale"] != "" {
			rows = append(rows, []string{"scale", ru.name(), r.notRun(ru, "scale")})
		}
	}
	for _, ru := range r.runs {
		if o := ru.overload; o != nil {
			rows = append(rows, []string{fmt.Sprintf("overload: %d cameras asking %g frames/s (%s analysed) for %s: fairness (Jain's index over per-camera analysed frames, 1 = equal)",
				o.Cameras, float64(o.Cameras)*o.Daemon.FPS, f1(o.Overall.EventsPerSec), dur(o.DurationS)), ru.name(),
				fmt.Sprintf("%s; frame age p99 %s ms, max %s ms (max_frame_age %s ms)", f3(o.Overall.Jain), f0(o.Overall.AgeP99), f0(o.Overall.AgeMax), f0(o.MaxFrameAgeS*1000))})
		} else if ru.tag == "cpu" || ru.failed["overload"] != "" {
			rows = append(rows, []string{"overload", ru.name(), r.notRun(ru, "overload")})
		}
	}
	for _, ru := range r.runs {
		if k := ru.soak; k != nil && len(k.Samples) > 0 {
			a, z := soakEnds(k)
			wa, wz := sum(a.WorkerMiB), sum(z.WorkerMiB)
			q := k.DurationS / 4
			h0, h1 := soakFloor(k, 0, q, heapOf), soakFloor(k, 3*q, k.DurationS, heapOf)
			rows = append(rows, []string{fmt.Sprintf("soak: %s, %d config edits: resident memory end ÷ start", dur(k.DurationS), len(k.Edits)), ru.name(),
				fmt.Sprintf("daemon %s (%s → %s MiB), workers %s (%s → %s MiB); daemon Go heap, lowest sample of the first ÷ last quarter, %s (%s → %s MiB)",
					f2(z.DaemonMiB/a.DaemonMiB), f0(a.DaemonMiB), f0(z.DaemonMiB), f2(wz/wa), f0(wa), f0(wz), f2(h1/h0), f0(h0), f0(h1))})
		} else if ru.tag == "cpu" || ru.failed["soak"] != "" {
			rows = append(rows, []string{"soak", ru.name(), r.notRun(ru, "soak")})
		}
	}
	rows = append(rows, r.memorySummary(local)...)
	rows = append(rows, r.clipsSummary(local), r.liveSummary(local))
	rows = append(rows, r.crowdSummary(local), r.vtestSummary(local))
	r.table([]string{"what", "where", "figure"}, rows)
	if local.env != nil && local.env.Load.One > float64(local.env.CPUs)/2 {
		r.p("The %s was shared with other work during the run (%s, on %d CPUs): figures measured there are lower bounds of what an idle box gives,", local.name(), local.loadNote(), local.env.CPUs)
		r.p("and both sides of each ratio ran under the same load.")
		r.p("")
	}
}

func (r *report) notRun(ru *run, part string) string {
	if why, ok := ru.failed[part]; ok {
		return "failed: " + oneLine(why)
	}
	return "not run"
}

func heapOf(s soakSample) float64 { return s.HeapMiB }
func rssOf(s soakSample) float64  { return s.DaemonMiB }

// soakFloor is the lowest positive f of the soak's samples between from and to seconds that
// have the start's cameras, all online. The Go heap is a sawtooth between collections, and
// RSS follows the camera count: the lowest sample of the first and of the last quarter show
// what stays.
func soakFloor(k *soakResult, from, to float64, f func(s soakSample) float64) float64 {
	a, _ := soakEnds(k)
	m := math.Inf(1)
	for _, s := range k.Samples {
		if s.Configured == a.Configured && s.Online == s.Configured && s.T >= from && s.T <= to && f(s) > 0 {
			m = math.Min(m, f(s))
		}
	}
	return m
}

// fakePeer reports whether peer.py ran with a fake session (--fake-output).
func fakePeer(p map[string]any) bool {
	v, _ := p["versions"].(map[string]any)
	return strings.HasPrefix(fmt.Sprint(v["onnxruntime"]), "none")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	return strings.ReplaceAll(s, "|", "/")
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

func dur(secs float64) string {
	return (time.Duration(secs) * time.Second).String()
}
