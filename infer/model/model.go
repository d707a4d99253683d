// Package model reads, inspects and rewrites ONNX detector models in Go: what `visiond
// model` does to a model file before the workers load it. It works on the graph
// (package onnxpb, the file format's generated types) and links no ONNX Runtime; what has
// to run a model (calibration, agreement) goes through package infer/worker.
package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/visiond/visiond/infer/model/onnxpb"
)

// Load reads the ONNX model at path.
func Load(path string) (*onnxpb.ModelProto, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	return m, nil
}

// Parse decodes an ONNX model from its bytes.
func Parse(b []byte) (*onnxpb.ModelProto, error) {
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not an ONNX model: %w", err)
	}
	if m.GetGraph() == nil {
		return nil, errors.New("not an ONNX model: it has no graph")
	}
	return &m, nil
}

// Save writes m to path atomically: to a temporary file in the same folder, renamed over
// path once complete, so that a worker never loads half a model.
func Save(m *onnxpb.ModelProto, path string) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("model: encode %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}
