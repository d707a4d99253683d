package main

import (
	"fmt"
	"slices"
	"strings"
)

// skipSection reports BenchmarkSkipNonRef (sources/bench_test.go, raw output skip.txt): the
// decode CPU of one camera analysed at 5 fps from a 15 fps stream, every frame decoded
// against non-reference frames left undecoded.
func (r *report) skipSection(local *run) {
	r.p("## Decode only what can be analysed: non-reference frames left undecoded")
	r.p("")
	r.p("`BenchmarkSkipNonRef` (sources/bench_test.go): 3 s clips of the sample video at 15 fps, a keyframe every second,")
	r.p("with B-frames (libx264 `-bf 2`, libx265 `bframes=3`) and without, decoded on one thread as a camera analysed at")
	r.p("5 fps does (the frame due every 200 ms scaled into the 640x640 letterbox), once with every frame decoded and once")
	r.p("with the frames nothing references left undecoded (libavcodec `skip_frame` AVDISCARD_NONREF), the two interleaved;")
	r.p("CPU per second of video from getrusage. Both give the same 5 analysed frames per second.")
	r.p("")
	for _, ru := range r.runs {
		if len(ru.skip) == 0 {
			continue
		}
		var rows [][]string
		for _, b := range ru.skip {
			m := b.metrics
			rows = append(rows, []string{strings.TrimPrefix(b.name, "BenchmarkSkipNonRef/"), f1(m["%nonref"]) + "%",
				f1(m["ms-cpu/s-all"]) + " ms", f1(m["ms-cpu/s-skip"]) + " ms", "**" + f1(m["%saved"]) + "%**",
				f1(m["analysed-fps-all"]) + " / " + f1(m["analysed-fps-skip"])})
		}
		r.p("%s, %s iterations per stream:", ru.name(), or(ru.knobs["BENCH_TIME"], "?"))
		r.p("")
		r.table([]string{"stream", "non-reference frames", "decode CPU per second, all decoded", "non-reference left undecoded", "saved", "analysed fps (all / skipping)"}, rows)
	}
	if len(local.skip) == 0 {
		r.p("Not run here: %s.", r.notRun(local, "skip"))
		r.p("")
	}
}

// skipSummary is the summary's row for skipSection.
func (r *report) skipSummary(local *run) [][]string {
	var with, without []float64
	for _, b := range local.skip {
		if b.metrics["%nonref"] > 0 {
			with = append(with, b.metrics["%saved"])
		} else {
			without = append(without, b.metrics["%saved"])
		}
	}
	if len(with) == 0 {
		return [][]string{{"decode, non-reference frames left undecoded", local.name(), r.notRun(local, "skip")}}
	}
	s := fmt.Sprintf("%s%% to %s%% less decode CPU on %d streams with B-frames", f1(slices.Min(with)), f1(slices.Max(with)), len(with))
	if len(without) > 0 {
		s += fmt.Sprintf(" (%s%% to %s%% on %d without, where nothing is skipped: the noise)", f1(slices.Min(without)), f1(slices.Max(without)), len(without))
	}
	return [][]string{{"decode: CPU of a camera at 5 fps from 15 fps, non-reference frames left undecoded ÷ all decoded", local.name(), s}}
}
