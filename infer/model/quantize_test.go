package model

import (
	"strings"
	"testing"

	"github.com/visiond/visiond/infer/model/onnxpb"
)

// TestCalibrationTensors: the real model's input and the float outputs of its nodes, in
// graph order (a node's inputs before it).
func TestCalibrationTensors(t *testing.T) {
	m := loadYOLO(t)
	names, err := CalibrationTensors(m)
	if err != nil {
		t.Fatal(err)
	}
	if names[0] != "images" {
		t.Errorf("first tensor %q, want the input images", names[0])
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("%s listed twice", n)
		}
		seen[n] = true
	}
	for _, n := range m.GetGraph().GetNode() {
		for _, o := range n.GetOutput() {
			if !seen[o] {
				t.Errorf("lacks %s, output of %s %s", o, n.GetOpType(), n.GetName())
			}
		}
	}
}

// TestQuantizeBadInput: a model already quantized or in fp16, a calibration of another
// model (or none), bad options: each refused with what is wrong.
func TestQuantizeBadInput(t *testing.T) {
	qdq := loadYOLO(t)
	g := qdq.GetGraph()
	g.Node = append([]*onnxpb.NodeProto{{Name: "q", OpType: "QuantizeLinear", Input: []string{"images", "s", "z"}, Output: []string{"iq"}}}, g.Node...)
	fp16 := loadYOLO(t)
	if err := ConvertFP16(fp16); err != nil {
		t.Fatal(err)
	}
	uint8In := loadYOLO(t)
	if err := AddUint8Prelude(uint8In); err != nil {
		t.Fatal(err)
	}
	empty := NewCalibration()
	for name, tc := range map[string]struct {
		m    *onnxpb.ModelProto
		opts QuantizeOptions
		want string
	}{
		"already int8":   {qdq, QuantizeOptions{}, "already quantized"},
		"fp16":           {fp16, QuantizeOptions{}, "is fp16"},
		"uint8 input":    {uint8In, QuantizeOptions{}, "is uint8, not float32"},
		"no calibration": {loadYOLO(t), QuantizeOptions{}, "calibration lacks"},
		"method":         {loadYOLO(t), QuantizeOptions{Method: "kl"}, `calibration method "kl"`},
		"percentile":     {loadYOLO(t), QuantizeOptions{Percentile: 40}, "percentile 40"},
	} {
		_, _, err := Quantize(tc.m, empty, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
	if _, err := CalibrationTensors(qdq); err == nil || !strings.Contains(err.Error(), "already quantized") {
		t.Errorf("CalibrationTensors of a quantized model: %v", err)
	}
}
