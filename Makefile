# visiond: `make run` sets up and runs the demo, `make test` runs the tests.
GO      ?= go
BIN     := bin/visiond
PKGS    := ./...
BENCH_TIME ?= 10x
PREFIX  ?= /usr/local
DESTDIR ?=
INSTALL ?= install

.PHONY: all setup setup-tests build run test test-loaded vet fmt-check tidy-check lint unit-check unit-sandbox-test setup-test setup-fresh-test bench bench-report bench-micro install clean

all: build

# Everything from nothing on Debian 12: apt packages, ONNX Runtime, the model, sample media.
setup:
	@GO=$(GO) scripts/setup.sh

# The binary as shipped (scripts/build.sh): position-independent, hardened C flags (fortify,
# stack protector, relro, bindnow), linked only with the OpenCV modules it uses
# (OPENCV_MODULES, default "videoio imgcodecs imgproc core": no highgui, so no Qt).
build:
	GO=$(GO) scripts/build.sh $(BIN)

# Built only when missing, so that `sudo make install` (where go may not be on the PATH)
# installs what `make build` made.
$(BIN):
	GO=$(GO) scripts/build.sh $(BIN)

# The daemon on its embedded demo config (a built-in sample camera, an embedded NATS server on
# 127.0.0.1:4222), printing the detections it publishes. Ctrl-C stops it.
run: setup build
	$(BIN) run -print

# -timeout bounds each package's test binary, against a hang: the pipeline package replays
# ten crowd scenes and a real recording through a real worker (pipeline/crowd_test.go,
# vtest_test.go), about 600 frames each, and draws the scenes' videos under the race
# detector, so it is by far the longest: 24.5 minutes of a 35-minute `make test` on the
# 2-core box (2026-12-05, beside a little other work).
test: setup-tests vet fmt-check tidy-check lint unit-check setup-test
	$(GO) test -race -count=1 -timeout 60m $(PKGS)

# The suite beside stress-ng keeping every core busy, as on a CI machine shared with other
# work: $(LOAD_PER_CPU) CPU stressors per CPU (a load of about 4x the CPUs). A test that
# passes here does not depend on how fast the machine is.
LOAD_PER_CPU ?= 4
test-loaded: setup-tests vet fmt-check tidy-check lint unit-check setup-test
	@command -v stress-ng >/dev/null || { echo "stress-ng missing: run make setup"; exit 1; }
	@stress-ng --cpu $$(( $(LOAD_PER_CPU) * $$(nproc) )) --timeout 3h --quiet & load=$$!; \
	trap 'kill $$load 2>/dev/null; wait $$load 2>/dev/null' EXIT; \
	sleep 2; echo "load: $$(cut -d' ' -f1-3 /proc/loadavg) with $$(( $(LOAD_PER_CPU) * $$(nproc) )) stressors"; \
	$(GO) test -race -count=1 -timeout 150m $(PKGS); rc=$$?; \
	echo "load at the end: $$(cut -d' ' -f1-3 /proc/loadavg)"; exit $$rc

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# go.mod and go.sum as `go mod tidy` would write them: prints the difference, fails on one.
tidy-check:
	$(GO) mod tidy -diff

# staticcheck at the version go.mod's tool line pins (honnef.co/go/tools v0.8.2), with its
# default checks: `go mod download` fetches it with the other modules, so it runs offline.
lint:
	$(GO) tool staticcheck $(PKGS)

# The systemd unit's sandbox: systemd-analyze security --offline=true scores it 2.5 or lower.
unit-check:
	@scripts/unit-check.sh

# The daemon (demo config, one CPU worker) inside the unit's system call filter, with no
# capabilities and not as root, where systemd is not PID 1 (as root; python3-seccomp).
unit-sandbox-test: setup build
	@scripts/unit-sandbox-test.sh $(BIN)

# scripts/setup.sh in a fresh Debian 12 chroot without Go or npm (as root, about 4-10 min):
# apt packages, nodejs and npm from Debian, the downloads, then the clear stop for Go.
setup-fresh-test:
	@scripts/setup-fresh-test.sh

# scripts/setup.sh fails with the way to get Go when the Go in use is older than go.mod's.
setup-test:
	@GO=$(GO) scripts/setup-test.sh

# setup, and what only the tests use (an older ONNX Runtime: scripts/setup.sh, SETUP_TESTS).
setup-tests:
	SETUP_TESTS=1 GO=$(GO) scripts/setup.sh

# The benchmark report: decode against ffmpeg, the daemon against bare loops, cameras sustained
# at 5 fps, overload, soak, memory per camera; raw results in $(BENCH_OUT), then BENCHMARKS.md and its soak plot.
# About 90 minutes with the defaults (the crowd part replays 30 held-out scenes: about 45);
# `make bench SOAK=2m OVERLOAD=1m CROWD_SEEDS=100-102` for a quick run,
# PARTS="scale soak" to rerun some parts (PARTS=clips: event clips off and on, not by default),
# GPU=DIR to merge scripts/gpu/bench.sh's results.
BENCH_VARS := BENCH_TIME PIPE_SECONDS PIPE_CAMERAS PIPE_WORKERS WORKERS THREADS SCALE_WINDOW OVERLOAD SOAK SOAK_EDIT SOAK_CAMERAS MEMORY_CAMERAS CROWD_SEEDS CLIPS_CAMERAS CLIPS_ROUNDS CLIPS_WARMUP CLIPS_WINDOW PARTS BENCH_OUT GPU
PIPE_SECONDS ?= 20
PIPE_CAMERAS ?= 4
PIPE_WORKERS ?=
WORKERS ?=
THREADS ?=
SCALE_WINDOW ?= 20s
OVERLOAD ?= 10m
SOAK ?= 30m
SOAK_EDIT ?= 1m
SOAK_CAMERAS ?= 8
MEMORY_CAMERAS ?= 1,4,16
CROWD_SEEDS ?= 100-129
PARTS ?= decode pipeline scale overload soak memory live crowd
BENCH_OUT ?= build/bench
GPU ?=
bench: setup
	$(foreach v,$(BENCH_VARS),$(v)='$($(v))') GO=$(GO) scripts/bench/run.sh

# BENCHMARKS.md again from the raw results already in $(BENCH_OUT) (and GPU=DIR's).
bench-report:
	$(GO) build -o bin/visiond-bench ./cmd/visiond-bench
	bin/visiond-bench report -in $(BENCH_OUT) $(if $(GPU),-gpu $(GPU)) -o BENCHMARKS.md

# Per-frame costs: decode, letterbox, preprocessing, one inference, postprocessing.
bench-micro: setup
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) ./sources/... ./infer/... ./pipeline/... ./live/...

# The binary to $(PREFIX)/bin, the systemd unit (its ExecStart pointed there) and, unless
# one is there already, the example config to /etc/visiond/visiond.yaml. DESTDIR stages
# the whole tree elsewhere (packaging). Then the steps printed at the end.
install: $(BIN)
	$(INSTALL) -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/doc/visiond \
		$(DESTDIR)/etc/systemd/system $(DESTDIR)/etc/visiond
	$(INSTALL) -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/visiond
	$(INSTALL) -m 644 README.md $(DESTDIR)$(PREFIX)/share/doc/visiond/README.md
	sed -e 's|/usr/local/bin/visiond|$(PREFIX)/bin/visiond|g' \
		-e 's|file:///usr/share/doc/visiond/|file://$(PREFIX)/share/doc/visiond/|g' \
		systemd/visiond.service > $(DESTDIR)/etc/systemd/system/visiond.service.new
	chmod 644 $(DESTDIR)/etc/systemd/system/visiond.service.new
	mv $(DESTDIR)/etc/systemd/system/visiond.service.new $(DESTDIR)/etc/systemd/system/visiond.service
	@if [ -e $(DESTDIR)/etc/visiond/visiond.yaml ]; then \
		echo "kept the existing $(DESTDIR)/etc/visiond/visiond.yaml (the example: configs/visiond.yaml)"; \
	else \
		echo "$(INSTALL) -m 644 configs/visiond.yaml $(DESTDIR)/etc/visiond/visiond.yaml"; \
		$(INSTALL) -m 644 configs/visiond.yaml $(DESTDIR)/etc/visiond/visiond.yaml; \
	fi
	@echo
	@echo "visiond installed. Next, as root:"
	@echo "  useradd --system --home-dir /var/lib/visiond --shell /usr/sbin/nologin --groups video,render visiond"
	@echo "  install -D -m 644 third_party/libonnxruntime.so.1 /usr/lib/visiond/libonnxruntime.so.1"
	@echo "  install -D -m 644 third_party/yolov8n.onnx /var/lib/visiond/yolov8n.onnx   # or your model"
	@echo "  edit /etc/visiond/visiond.yaml (cameras; chgrp visiond and chmod 640 it once it holds passwords)"
	@echo "  $(PREFIX)/bin/visiond check -config /etc/visiond/visiond.yaml"
	@echo "  systemctl daemon-reload"
	@echo "  systemctl enable --now visiond"
	@echo "  journalctl -u visiond -f    # status page: http://127.0.0.1:8080/"

clean:
	rm -rf bin

# linux/arm64 (issue 7): cross-build with cgo against a Debian 12 arm64 sysroot made by
# debootstrap (build/sysroot-arm64, made once, about 5 min), plus ONNX Runtime's arm64
# library: bin/linux-arm64/visiond and third_party/linux-arm64/libonnxruntime.so.1.
# SUITE=bullseye builds against Debian 11 instead (FFmpeg 4.3, OpenCV 4.5.1, GStreamer 1.18:
# the library generation of JetPack 6's Ubuntu 22.04, docs/jetson.md), in
# build/sysroot-arm64-bullseye and bin/linux-arm64-bullseye/visiond.
SUITE ?= bookworm
arm64:
	@VISIOND_SYSROOT_SUITE=$(SUITE) scripts/cross-arm64.sh

# The arm64 binary under qemu-user: check on the example config, and one worker inference
# on a still image (CPU provider), compared with the native binary's. SUITE=bullseye: the
# Debian 11 build, plus the FFmpeg decoder's tests (package sources) against Debian 11's
# libavcodec.
cross-test: setup arm64
	@VISIOND_SYSROOT_SUITE=$(SUITE) scripts/cross-test.sh

# Both library generations, one after the other.
cross-test-all: setup
	@$(MAKE) --no-print-directory cross-test SUITE=bookworm
	@$(MAKE) --no-print-directory cross-test SUITE=bullseye

# Debian packages in build/deb/: visiond_<version>_amd64.deb and, from the cross build, _arm64.deb.
deb: deb-amd64 deb-arm64

# MAINTAINER='Full Name <mail>' sets the packages' Maintainer (default: DEBFULLNAME and
# DEBEMAIL, else git's user.name and user.email).
MAINTAINER ?=
deb-amd64: setup build
	@$(if $(MAINTAINER),VISIOND_MAINTAINER='$(MAINTAINER)') scripts/deb.sh amd64

deb-arm64: arm64
	@$(if $(MAINTAINER),VISIOND_MAINTAINER='$(MAINTAINER)') scripts/deb.sh arm64

# The amd64 package installed in a clean Debian 12 chroot (debootstrap, kept in build/),
# checked, run as the unit would run it, reinstalled and purged.
deb-test: deb-amd64
	@scripts/deb-test.sh
.PHONY: arm64 cross-test cross-test-all deb deb-amd64 deb-arm64 deb-test

# A bundle that runs where it was not built (docs/bundle.md): build/bundle/visiond-<version>-
# linux-$(ARCH).tar.gz (the binary, ONNX Runtime's CPU library and every shared library they
# need but glibc's, found through the binary's RPATH; a launcher that checks the glibc floor)
# and a .deb of the same tree (/opt/visiond). ARCH=arm64 bundles the cross build, SUITE=bullseye
# the one against Debian 11 (a glibc floor JetPack 6 meets: docs/bundle.md).
# Not taken from the environment (where ARCH may be x86_64): make bundle ARCH=arm64.
ARCH := amd64
bundle: bundle-$(ARCH)

bundle-amd64: setup build
	@scripts/bundle.sh amd64

bundle-arm64: arm64
	@VISIOND_SYSROOT_SUITE=$(SUITE) scripts/bundle.sh arm64

# Both bundles in roots that have none of Debian 12's libraries (as root; debootstrap roots
# kept in build/bundle-test/): Ubuntu 24.04 runs the demo and detects people, with the bundled
# and with the system's GStreamer; Ubuntu 22.04 and Debian 11 arm64 (qemu-user) below the glibc
# floor get the launcher's refusal.
# Needs make cross-test first (the qemu ONNX Runtime runs under, for the Debian 11 inference).
bundle-test: bundle-amd64
	@$(MAKE) --no-print-directory bundle-arm64 SUITE=bookworm
	@$(MAKE) --no-print-directory bundle-arm64 SUITE=bullseye
	@scripts/bundle-test.sh
.PHONY: bundle bundle-amd64 bundle-arm64 bundle-test
