package infer

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

func frame(payload string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	return append(b, payload...)
}

func rawLen(n uint32, payload string) []byte {
	return append(binary.LittleEndian.AppendUint32(nil, n), payload...)
}

var readMessageCases = []struct {
	name    string
	in      []byte
	wantIs  error
	wantErr string
}{
	{"empty stream", nil, io.EOF, "EOF"},
	{"oversize length", rawLen(MaxFrameSize+1, "{}"), ErrFrameTooLarge, "length 1048577 exceeds 1048576"},
	{"huge length", rawLen(0xffffffff, ""), ErrFrameTooLarge, "length 4294967295 exceeds"},
	{"zero length", rawLen(0, ""), ErrBadMessage, "empty frame"},
	{"truncated length", []byte{7, 0}, ErrFrameTruncated, "after 2 of 4 length bytes"},
	{"truncated payload", rawLen(20, `{"type":`), ErrFrameTruncated, "after 8 of 20 payload bytes"},
	{"bad JSON", frame(`{"type":"job",`), ErrBadMessage, "malformed JSON"},
	{"not an object", frame(`[1,2]`), ErrBadMessage, "malformed JSON"},
	{"trailing data", frame(`{"type":"result","result":{"id":1}} {}`), ErrBadMessage, "trailing data"},
	{"unknown type", frame(`{"type":"bogus"}`), ErrBadMessage, `unknown message type "bogus"`},
	{"missing type", frame(`{}`), ErrBadMessage, `unknown message type ""`},
	{"type without body", frame(`{"type":"job"}`), ErrBadMessage, `must carry exactly its "job" field`},
	{"two bodies", frame(`{"type":"job","job":{},"result":{}}`), ErrBadMessage, `must carry exactly its "job" field`},
	{"unknown field", frame(`{"type":"job","job":{"id":1,"frobnicate":true}}`), ErrBadMessage, `unknown field "frobnicate"`},
	{"wrong field type", frame(`{"type":"job","job":{"id":"one"}}`), ErrBadMessage, "malformed JSON"},
	{"job", frame(`{"type":"job","job":{"id":7,"slot":1,"camera":"gate","seq":42,"letterbox":{"src_w":768,"src_h":576,"dst_w":640,"dst_h":640,"scaled_w":640,"scaled_h":480,"pad_x":0,"pad_y":80}}}`), nil, ""},
	{"hello", frame(`{"type":"hello","hello":{"pid":1,"model":"m","input_w":640,"input_h":640,"classes":["a"],"provider":"cpu"}}`), nil, ""},
	{"result", frame(`{"type":"result","result":{"id":7,"detections":[{"class_id":0,"label":"a","score":0.5,"box":{"x":1,"y":2,"w":3,"h":4}}],"pre_us":1,"run_us":2,"post_us":3}}`), nil, ""},
	{"result with appearance", frame(resultWithAppearance(appearanceB64)), nil, ""},
	{"appearance too short", frame(resultWithAppearance(appearanceB64[:124])), ErrBadMessage, "appearance: 124 base64 characters, want 128 (96 bytes)"},
	{"appearance too long", frame(resultWithAppearance(appearanceB64 + "AAAA")), ErrBadMessage, "appearance: 132 base64 characters, want 128 (96 bytes)"},
	{"appearance not base64", frame(resultWithAppearance("*" + appearanceB64[1:])), ErrBadMessage, "appearance: not base64"},
	{"appearance not a string", frame(strings.Replace(resultWithAppearance(""), `""`, `[1,2,3]`, 1)), ErrBadMessage, "appearance: want a base64 string"},
}

// appearanceB64 is a descriptor on the wire: 96 bytes, 0 to 95, in base64.
var appearanceB64 = func() string {
	var d appearance.Descriptor
	for i := range d {
		d[i] = byte(i)
	}
	return base64.StdEncoding.EncodeToString(d[:])
}()

func resultWithAppearance(b64 string) string {
	return `{"type":"result","result":{"id":7,"detections":[{"class_id":0,"label":"a","score":0.5,"box":{"x":1,"y":2,"w":3,"h":4},"appearance":"` +
		b64 + `"}],"pre_us":1,"run_us":2,"post_us":3}}`
}

func TestReadMessage(t *testing.T) {
	for _, tc := range readMessageCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _, err := ReadMessage(bytes.NewReader(tc.in), nil)
			if tc.wantIs == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				// Round trip through writeMessage.
				var buf bytes.Buffer
				if err := WriteMessage(&buf, m); err != nil {
					t.Fatal(err)
				}
				m2, _, err := ReadMessage(&buf, nil)
				if err != nil || !reflect.DeepEqual(m2, m) {
					t.Fatalf("round trip: %+v, %v", m2, err)
				}
				return
			}
			if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %v containing %q", err, tc.wantIs, tc.wantErr)
			}
		})
	}
	// A detection's appearance decodes to its bytes, and a detection without one to none.
	m, _, err := ReadMessage(bytes.NewReader(frame(resultWithAppearance(appearanceB64))), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := m.Result.Detections[0].Appearance; d[0] != 0 || d[1] != 1 || d[95] != 95 {
		t.Errorf("appearance decoded to %v", d)
	}
	m, _, err = ReadMessage(bytes.NewReader(readMessageCases[17].in), nil)
	if err != nil || !m.Result.Detections[0].Appearance.IsZero() {
		t.Errorf("result without appearance: %+v, %v", m.Result, err)
	}
	// The job decodes to its fields.
	m, _, err = ReadMessage(bytes.NewReader(readMessageCases[15].in), nil)
	if err != nil || m.Job.ID != 7 || m.Job.Slot != 1 || m.Job.Camera != "gate" || m.Job.Letterbox != geom.NewLetterbox(768, 576, 640, 640) {
		t.Fatalf("job: %+v %v", m.Job, err)
	}
}

func TestCheckJob(t *testing.T) {
	lb := geom.NewLetterbox(768, 576, 640, 640)
	for _, tc := range []struct {
		name    string
		job     JobMsg
		wantErr string
	}{
		{"ok", JobMsg{ID: 1, Slot: 1, Letterbox: lb}, ""},
		{"slot high", JobMsg{ID: 2, Slot: 2, Letterbox: lb}, "job 2: slot 2 out of range [0,2)"},
		{"slot negative", JobMsg{ID: 3, Slot: -1, Letterbox: lb}, "slot -1 out of range"},
		{"other canvas", JobMsg{ID: 4, Letterbox: geom.NewLetterbox(768, 576, 320, 320)}, "letterbox canvas 320x320 does not match model input 640x640"},
		{"zero source", JobMsg{ID: 5, Letterbox: geom.Letterbox{DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 640}}, "source size 0x0 is not positive"},
		{"scaled too big", JobMsg{ID: 6, Letterbox: geom.Letterbox{SrcW: 10, SrcH: 10, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 640, PadY: 1}}, "does not fit the 640x640 canvas"},
	} {
		err := CheckJob(&tc.job, 2, 640, 640)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// What the daemon writes (WorkerFlags.Args) the worker reads back (ParseWorkerFlags), with
// the detector's defaults filled in; bad flags are refused with the flag named.
func TestWorkerFlags(t *testing.T) {
	in := WorkerFlags{Detector: DetectorOptions{Model: "/m/y.onnx", Library: "/l/ort.so", Provider: ProviderCUDA, Device: 1,
		Fallback: ProviderCPU, CUDA: CUDAOptions{GPUMemLimit: 1 << 30}}, Slots: 8, SlotBytes: 640 * 640 * 3, Sessions: 4}
	got, err := ParseWorkerFlags(in.Args())
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Detector.SetDefaults()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-detector", `{"model":"m"}`, "-slots", "0"}, "-slots 0 must be >= 1"},
		{[]string{"-detector", `{"model":"m"}`, "-slot-bytes", "-1"}, "-slot-bytes -1 must be >= 1"},
		{[]string{"-detector", `{"model":"m"}`, "-sessions", "0"}, "-sessions 0 must be in 1..64"},
		{[]string{"-detector", `{"model":"m"}`, "-sessions", "65"}, "-sessions 65 must be in 1..64"},
		{[]string{"-detector", `{"model":"m"}`, "-sessions", "two"}, `invalid value "two" for flag -sessions`},
		{[]string{"-detector", `{"model":"m","frobnicate":1}`}, `-detector: json: unknown field "frobnicate"`},
		{[]string{"-detector", `{"model":"m","provider":"tpu"}`}, `-detector: provider "tpu"`},
		{[]string{"-detector", `{"model":"m","confidence":1}`}, "-detector: confidence must be between 0 and 1 (exclusive), got 1"},
		{[]string{"-detector", `{"model":"m"}`, "extra"}, `unexpected argument "extra"`},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
	} {
		if _, err := ParseWorkerFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: err %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

func FuzzReadMessage(f *testing.F) {
	for _, tc := range readMessageCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		var buf []byte
		for range 4 {
			m, b, err := ReadMessage(r, buf)
			buf = b
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrFrameTooLarge) &&
					!errors.Is(err, ErrFrameTruncated) && !errors.Is(err, ErrBadMessage) {
					t.Fatalf("unclassified error %v", err)
				}
				return
			}
			// Whatever decodes must carry its body and survive a round trip.
			var w bytes.Buffer
			if err := WriteMessage(&w, m); err != nil {
				t.Fatalf("re-encode %+v: %v", m, err)
			}
			if _, _, err := ReadMessage(&w, nil); err != nil {
				t.Fatalf("re-read %+v: %v", m, err)
			}
		}
	})
}
