package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/worker"
)

// tensorCmd writes, for each image, what scripts/bench/peer.py -selftest checks its own
// preprocessing and postprocessing against, where Python's onnxruntime is not installed:
// NAME.input.npy (the letterboxed RGB canvas, uint8 HxWx3, from visiond's LetterboxImage),
// NAME.output.npy (the model's raw output on it, float32, run through ONNX Runtime here) and
// NAME.json (visiond's detections on it, in source pixels, and the letterbox).
func tensorCmd(args []string) error {
	fs := flag.NewFlagSet("tensor", flag.ContinueOnError)
	model := fs.String("model", "third_party/yolov8n.onnx", "model")
	lib := fs.String("library", libDefault(), "libonnxruntime.so")
	out := fs.String("o", "build/bench/tensors", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	images := fs.Args()
	if len(images) == 0 {
		images = []string{"third_party/media/messi5.jpg", "third_party/media/basketball1.png"}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	det, err := worker.NewDetector(infer.DetectorOptions{Model: *model, Library: *lib, Provider: "cpu"})
	if err != nil {
		return err
	}
	defer det.Close()
	info := det.Model()
	ins, outs, err := ort.GetInputOutputInfo(*model)
	if err != nil {
		return err
	}
	if len(ins) != 1 || len(outs) != 1 || ins[0].DataType != ort.TensorElementDataTypeFloat || outs[0].DataType != ort.TensorElementDataTypeFloat {
		return fmt.Errorf("%s: want one float32 input and one float32 output", *model)
	}
	sess, err := ort.NewDynamicAdvancedSession(*model, []string{ins[0].Name}, []string{outs[0].Name}, nil)
	if err != nil {
		return err
	}
	defer sess.Destroy()
	w, h := info.InputW, info.InputH
	for _, path := range images {
		img := gocv.IMRead(path, gocv.IMReadColor)
		if img.Empty() {
			return fmt.Errorf("%s: cannot read", path)
		}
		pix := make([]byte, w*h*3)
		lb, err := worker.LetterboxImage(img, w, h, pix)
		img.Close()
		if err != nil {
			return err
		}
		dets, _, err := det.Detect(pix, lb, nil)
		if err != nil {
			return err
		}
		chw := make([]float32, 3*w*h)
		for i := range w * h {
			for c := range 3 {
				chw[c*w*h+i] = float32(pix[3*i+c]) / 255
			}
		}
		in, err := ort.NewTensor(ort.NewShape(1, 3, int64(h), int64(w)), chw)
		if err != nil {
			return err
		}
		o, err := ort.NewEmptyTensor[float32](outs[0].Dimensions)
		if err != nil {
			in.Destroy()
			return err
		}
		err = sess.Run([]ort.Value{in}, []ort.Value{o})
		in.Destroy()
		if err != nil {
			o.Destroy()
			return err
		}
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		base := filepath.Join(*out, name)
		shape := make([]int, len(outs[0].Dimensions))
		for i, d := range outs[0].Dimensions {
			shape[i] = int(d)
		}
		err = writeNPY(base+".output.npy", "<f4", shape, o.GetData())
		o.Destroy()
		if err != nil {
			return err
		}
		if err := writeNPY(base+".input.npy", "|u1", []int{h, w, 3}, pix); err != nil {
			return err
		}
		if err := writeJSON(base+".json", map[string]any{"image": abs(path), "letterbox": lb, "detections": dets,
			"classes": info.Classes, "confidence": 0.25, "iou": 0.45}); err != nil {
			return err
		}
		logf("tensor: %s: %d detections; %s.{input,output}.npy", path, len(dets), base)
	}
	return nil
}

// writeNPY writes data (a slice of a fixed-size type) as a NumPy .npy file, version 1.0.
func writeNPY(path, descr string, shape []int, data any) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, tuple)
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	_ = binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	if err := binary.Write(&b, binary.LittleEndian, data); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
