# visiond: `make run` sets up and runs the demo, `make test` runs the tests.
GO      ?= go
BIN     := bin/visiond
PKGS    := ./...
BENCH_TIME ?= 20x

.PHONY: all setup build run test vet fmt-check tidy-check bench clean

all: build

# Everything from nothing on Debian 12: apt packages, ONNX Runtime, the model, sample media.
setup:
	@scripts/setup.sh

build:
	$(GO) build -o $(BIN) ./cmd/visiond

# The daemon on its embedded demo config (a built-in sample camera, an embedded NATS server on
# 127.0.0.1:4222), printing the detections it publishes. Ctrl-C stops it.
run: setup build
	$(BIN) run -print

test: setup vet fmt-check
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy -diff

# Per-frame costs: decode, letterbox, preprocessing, one inference, postprocessing.
bench: setup
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) ./sources/... ./infer/... ./pipeline/...

clean:
	rm -rf bin
