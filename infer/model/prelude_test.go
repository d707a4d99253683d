package model

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer/model/onnxpb"
)

func TestAddUint8Prelude(t *testing.T) {
	m := loadYOLO(t)
	if err := AddUint8Prelude(m); err != nil {
		t.Fatal(err)
	}
	g := m.GetGraph()
	checkTopological(t, g)
	info, err := Inspect(m)
	if err != nil {
		t.Fatal(err)
	}
	if info.Input.String() != "images [1 640 640 3] uint8" || info.InputLayout != "NHWC uint8" || info.InputW != 640 || info.InputH != 640 ||
		info.Precision != FP32 || len(info.Classes) != 80 {
		t.Fatalf("with the prelude: %+v", info)
	}
	var ops []string
	for _, n := range g.GetNode()[:3] {
		ops = append(ops, n.GetOpType())
	}
	if !slices.Equal(ops, []string{"Transpose", "Cast", "Div"}) || g.GetNode()[0].GetInput()[0] != "images" ||
		!slices.Equal(g.GetNode()[0].GetAttribute()[0].GetInts(), []int64{0, 3, 1, 2}) || attrInt(g.GetNode()[1], "to", 0) != int64(tFloat) {
		t.Errorf("prelude %v", g.GetNode()[:3])
	}
	// The original graph reads the prelude's output, not the frame.
	for _, n := range g.GetNode()[3:] {
		if slices.Contains(n.GetInput(), "images") {
			t.Errorf("node %q reads the uint8 input", n.GetName())
		}
	}
	if err := AddUint8Prelude(m); !errors.Is(err, ErrHasPrelude) {
		t.Errorf("second prelude: %v", err)
	}

	// Converted to fp16 after: the prelude casts straight to float16.
	if err := ConvertFP16(m); err != nil {
		t.Fatal(err)
	}
	checkTopological(t, m.GetGraph())
	cast := m.GetGraph().GetNode()[1]
	if cast.GetOpType() != "Cast" || attrInt(cast, "to", 0) != int64(tFloat16) {
		t.Errorf("prelude cast after fp16: %v", cast)
	}
	info, err = Inspect(m)
	if err != nil || info.Precision != FP16 || info.Input.Type != "uint8" {
		t.Errorf("fp16 with the prelude: %+v, %v", info, err)
	}
}

func TestInspectUint8InputShape(t *testing.T) {
	m := loadYOLO(t)
	m.GetGraph().Input = []*onnxpb.ValueInfoProto{testTensor("images", tUint8, 1, 3, 640, 640)}
	if _, err := Inspect(m); !errors.Is(err, ErrNotDetector) || !contains(err, "want static [1,H,W,3] for uint8") {
		t.Errorf("uint8 NCHW: %v", err)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }
