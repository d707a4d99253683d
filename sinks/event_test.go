package sinks

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/visiond/visiond/sinks/natstest"
)

// sampleEvent is the first detection event of the demo (the sample video vtest.avi, yolov8n,
// CPU) as the daemon published it before its numbers were rounded, decoded.
func sampleEvent(tb testing.TB) *DetectionEvent {
	tb.Helper()
	const published = `{"version":1,"id":"c19ee3a2.sample.1","site":"demo","camera":"sample","captured_at":"2026-12-01T01:41:15.110969182Z","published_at":"2026-12-01T01:41:15.23873552Z","frame":{"seq":1,"width":768,"height":576},"model":"yolov8n","detections":[` +
		`{"label":"person","class_id":0,"score":0.8401799,"box":{"x":316.71998291015626,"y":207.40180664062498,"w":38.8927001953125,"h":86.56494140625003},"box_norm":{"x":0.41239581108093265,"y":0.36007258097330724,"w":0.050641536712646484,"h":0.15028635660807296}},` +
		`{"label":"person","class_id":0,"score":0.8320887,"box":{"x":464.1715576171875,"y":168.02076416015623,"w":38.51411132812501,"h":78.51676025390626},"box_norm":{"x":0.6043900489807129,"y":0.2917027155558268,"w":0.050148582458496106,"h":0.13631381988525393}},` +
		`{"label":"car","class_id":2,"score":0.7410188,"box":{"x":733.995556640625,"y":50.4391845703125,"w":33.694628906250045,"h":44.542895507812496},"box_norm":{"x":0.9557233810424804,"y":0.08756802876790365,"w":0.04387321472167975,"h":0.07733141581217447}}],` +
		`"latency_ms":{"queue":0.039,"pre":1.894,"infer":127.475,"post":0.747,"total":130.818}}`
	var ev DetectionEvent
	if err := json.Unmarshal([]byte(published), &ev); err != nil {
		tb.Fatal(err)
	}
	return &ev
}

// A detection's numbers go out with the precision they have: pixels to 0.1, fractions of the
// frame to 4 decimals, scores to 3; the event is a third smaller and still matches its schema.
func TestDetectionJSONPrecision(t *testing.T) {
	ev := sampleEvent(t)
	got, err := json.Marshal(ev.Detections[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"label":"person","class_id":0,"score":0.84,"box":{"x":316.7,"y":207.4,"w":38.9,"h":86.6},"box_norm":{"x":0.4124,"y":0.3601,"w":0.0506,"h":0.1503}}`
	if string(got) != want {
		t.Errorf("detection JSON\n got %s\nwant %s", got, want)
	}

	// The whole event: smaller by a third, valid, and decoding gives the rounded numbers.
	type unrounded Detection // encodes as before: every float64 in full
	full := *ev
	full.Detections = nil
	before, _ := json.Marshal(struct {
		*DetectionEvent
		Detections []unrounded `json:"detections"`
	}{&full, []unrounded{unrounded(ev.Detections[0]), unrounded(ev.Detections[1]), unrounded(ev.Detections[2])}})
	after, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) > len(before)*75/100 {
		t.Errorf("event of 3 detections: %d bytes rounded, %d before: want at least 25%% less\n%s", len(after), len(before), after)
	}
	if err := natstest.NewValidator(t, Schemas()).Validate("detections.json", after); err != nil {
		t.Errorf("rounded event breaks its schema: %v\n%s", err, after)
	}
	var back DetectionEvent
	if err := json.Unmarshal(after, &back); err != nil {
		t.Fatal(err)
	}
	if b := back.Detections[2]; b.Score != 0.741 || b.Box != (Box{X: 734, Y: 50.4, W: 33.7, H: 44.6}) ||
		b.BoxNorm != (Box{X: 0.9557, Y: 0.0876, W: 0.0439, H: 0.0773}) {
		t.Errorf("decoded %+v", b)
	}
}

// Rounding keeps numbers in their ranges, writes no "-0", and never more digits than it keeps.
func TestDetectionJSONRounding(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Detection
		want string // a part of the JSON
	}{
		{"score up to 1", Detection{Score: 0.99996}, `"score":1,`},
		{"at the frame edge", Detection{BoxNorm: Box{X: 0.99996, W: 0.00004}}, `"box_norm":{"x":1,"y":0,"w":0,"h":0}`},
		{"whole frame", Detection{BoxNorm: Box{X: 0.00004, Y: 0.00005, W: 0.99996, H: 0.99995}}, `"box_norm":{"x":0,"y":0.0001,"w":1,"h":0.9999}`},
		{"corners inside the frame", Detection{Box: Box{X: 700.05, Y: 0.05, W: 67.95, H: 575.95}}, `"box":{"x":700.1,"y":0.1,"w":67.9,"h":575.9}`},
		{"negative zero", Detection{Box: Box{X: -0.04, Y: math.Copysign(0, -1), W: 0.04}}, `"box":{"x":0,"y":0,"w":0,"h":0}`},
		{"half away from zero", Detection{Box: Box{X: 0.25, Y: 1.35, W: 1919.75}}, `"box":{"x":0.3,"y":1.4,"w":1919.7,"h":0}`},
		{"float32 score", Detection{Score: 0.25}, `"score":0.25,`},
		{"small score", Detection{Score: 0.0104}, `"score":0.01,`},
	} {
		got, err := json.Marshal(tc.d)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), tc.want) {
			t.Errorf("%s: %s, want %s in it", tc.name, got, tc.want)
		}
	}
	// Every value of a 4K frame's pixel grid at tenths, and fractions at 4 decimals, is written
	// with at most that many decimals, and a box inside the frame stays inside.
	for i := range 38400 {
		x := float64(i)/10 + 0.0499
		d := Detection{Box: Box{X: x, W: 3840 - x}, BoxNorm: Box{X: x / 3840, W: 1 - x/3840}}
		b, _ := json.Marshal(d)
		var back Detection
		if err := json.Unmarshal(b, &back); err != nil || back.Box.X+back.Box.W > 3840 || back.BoxNorm.X+back.BoxNorm.W > 1 {
			t.Fatalf("%v: %s: outside the frame", x, b)
		}
		for _, field := range []struct {
			key      string
			decimals int
		}{{`"box":{"x":`, 1}, {`,"w":`, 1}, {`"box_norm":{"x":`, 4}} {
			rest := string(b)[strings.Index(string(b), field.key)+len(field.key):]
			if decimals(rest) > field.decimals {
				t.Fatalf("%v: %s: %s with more than %d decimals", x, b, field.key, field.decimals)
			}
		}
	}
}

// decimals counts the digits after the point of the JSON number at the start of s.
func decimals(s string) int {
	s = s[:strings.IndexAny(s, ",}")]
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

// BenchmarkEncodeDetectionEvent encodes the sample's first event (3 detections) as published
// ("rounded") and with every float64 in full as before ("full"): the cost of rounding.
func BenchmarkEncodeDetectionEvent(b *testing.B) {
	ev := sampleEvent(b)
	type unrounded Detection
	full := struct {
		*DetectionEvent
		Detections []unrounded `json:"detections"`
	}{ev, []unrounded{unrounded(ev.Detections[0]), unrounded(ev.Detections[1]), unrounded(ev.Detections[2])}}
	for _, c := range []struct {
		name string
		v    any
	}{{"rounded", ev}, {"full", full}} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				data, err := json.Marshal(c.v)
				if err != nil {
					b.Fatal(err)
				}
				n = len(data)
			}
			b.ReportMetric(float64(n), "bytes/event")
		})
	}
}
