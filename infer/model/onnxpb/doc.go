// Package onnxpb holds the Go types of the ONNX file format (ModelProto and the rest),
// generated from onnx.proto3 of github.com/onnx/onnx at f7546912 (2026-08-22), the IR
// version 14 schema. Fields a newer file adds that this schema lacks are kept as unknown
// fields by google.golang.org/protobuf and written back unchanged.
//
// To regenerate (protoc from Debian's protobuf-compiler, protoc-gen-go v1.36.12):
//
//	go generate ./infer/model/onnxpb
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto3=github.com/visiond/visiond/infer/model/onnxpb onnx.proto3
