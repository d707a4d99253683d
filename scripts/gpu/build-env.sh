# Sourced by the GPU scripts' pack steps: cgo flags for binaries that run on the GPU machine,
# which has no libopencv_highgui (and its Qt): gocv's customenv build tag takes OpenCV's
# include path from pkg-config, the four modules the code uses, and drops unused wrappers
# (scripts/build.sh explains each). Build with `go build -tags customenv`.
export CGO_CPPFLAGS="$(pkg-config --cflags opencv4)" CGO_CFLAGS="-O2 -ffunction-sections -fdata-sections"
export CGO_CXXFLAGS="$CGO_CFLAGS" CGO_LDFLAGS="-Wl,--gc-sections -lopencv_videoio -lopencv_imgcodecs -lopencv_imgproc -lopencv_core"
