package videofile

import (
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"

	"github.com/visiond/visiond/internal/testutil"
)

func TestReadSample(t *testing.T) {
	r, err := Open(testutil.Media(t, "vtest.h264.ts"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n, idr int
	var last int64 = -1
	for {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && au.DTS != 0 {
			t.Fatalf("first DTS %d, want 0", au.DTS)
		}
		if au.DTS <= last {
			t.Fatalf("AU %d: DTS %d not after %d", n, au.DTS, last)
		}
		last = au.DTS
		for _, nalu := range au.NALUs {
			if h264.NALUType(nalu[0]&0x1F) == h264.NALUTypeIDR {
				idr++
				break
			}
		}
		n++
	}
	// 79.5 s at 10 fps, GOP 10.
	if n != 795 || idr < 79 || last != 794*9000 {
		t.Fatalf("read %d AUs, %d IDR, last DTS %d", n, idr, last)
	}
}

func TestNotMPEGTS(t *testing.T) {
	_, err := Open(testutil.Media(t, "messi5.jpg"))
	if err == nil || !strings.Contains(err.Error(), "neither an MPEG-TS nor an MP4 file") || !strings.Contains(err.Error(), "messi5.jpg") {
		t.Fatalf("err = %v", err)
	}
	_, err = Open(filepath.Join(t.TempDir(), "missing.ts"))
	if err == nil || !strings.Contains(err.Error(), "missing.ts") {
		t.Fatalf("err = %v", err)
	}
}

// ffmpeg runs ffmpeg with args, writing out in a temporary folder; it returns out's path.
func ffmpeg(t *testing.T, out string, args ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), out)
	args = append([]string{"-nostdin", "-v", "error", "-y"}, append(args, path)...)
	if msg, err := exec.Command(testutil.LookPath(t, "ffmpeg"), args...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, msg)
	}
	return path
}

// readAll reads every access unit of file.
func readAll(t *testing.T, file string) (*Reader, []AccessUnit) {
	t.Helper()
	r, err := Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var aus []AccessUnit
	for {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			return r, aus
		}
		if err != nil {
			t.Fatalf("%s: unit %d: %v", file, len(aus)+1, err)
		}
		aus = append(aus, au)
	}
}

// An MP4 remuxed from the sample (moov at the end as ffmpeg writes it, or first, with an
// audio track beside the video) reads as the same access units at the same times as the
// MPEG-TS, its parameter sets given apart, as the container holds them.
func TestReadMP4(t *testing.T) {
	ts := testutil.Media(t, "vtest.h264.ts")
	_, want := readAll(t, ts)
	for name, args := range map[string][]string{
		"moov last":  {"-i", ts, "-c", "copy"},
		"moov first": {"-i", ts, "-c", "copy", "-movflags", "+faststart"},
		"with audio": {"-i", ts, "-f", "lavfi", "-i", "sine=frequency=440:duration=80", "-map", "0:v", "-map", "1:a", "-c:v", "copy", "-c:a", "aac", "-shortest"},
	} {
		t.Run(name, func(t *testing.T) {
			r, got := readAll(t, ffmpeg(t, "sample.mp4", args...))
			if r.Codec != "H.264" || r.Container != "MP4" || len(r.Params) != 2 ||
				h264.NALUType(r.Params[0][0]&0x1F) != h264.NALUTypeSPS || h264.NALUType(r.Params[1][0]&0x1F) != h264.NALUTypePPS {
				t.Fatalf("codec %q container %q, %d parameter sets", r.Codec, r.Container, len(r.Params))
			}
			if len(got) != len(want) {
				t.Fatalf("%d units, the MPEG-TS has %d", len(got), len(want))
			}
			for i := range want {
				if got[i].DTS != want[i].DTS || got[i].PTS-got[0].PTS != want[i].PTS-want[0].PTS {
					t.Fatalf("unit %d: DTS %d PTS %d, the MPEG-TS's %d %d", i+1, got[i].DTS, got[i].PTS, want[i].DTS, want[i].PTS)
				}
				// The MPEG-TS carries the parameter sets in band, the MP4 in its avcC: compare the
				// pictures' own NAL units.
				if g, w := pictures(got[i].NALUs), pictures(want[i].NALUs); !reflect.DeepEqual(g, w) {
					t.Fatalf("unit %d: %d picture NAL units, the MPEG-TS's %d, or their bytes differ", i+1, len(g), len(w))
				}
			}
		})
	}
}

// pictures is the slice NAL units of an access unit (types 1 to 5).
func pictures(nalus [][]byte) [][]byte {
	var out [][]byte
	for _, n := range nalus {
		if typ := h264.NALUType(n[0] & 0x1F); typ >= h264.NALUTypeNonIDR && typ <= h264.NALUTypeIDR {
			out = append(out, n)
		}
	}
	return out
}

// H.265 in MP4: the VPS, SPS and PPS from its hvcC, B-frames' presentation times after their
// decoding times.
func TestReadMP4H265(t *testing.T) {
	file := ffmpeg(t, "h265.mp4", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10:duration=3", "-c:v", "libx265",
		"-x265-params", "log-level=error:keyint=10:bframes=2", "-pix_fmt", "yuv420p")
	r, aus := readAll(t, file)
	if r.Codec != "H.265" || len(r.Params) != 3 || len(aus) != 30 {
		t.Fatalf("codec %q, %d parameter sets, %d units", r.Codec, len(r.Params), len(aus))
	}
	var reordered bool
	for i, au := range aus {
		if au.DTS != int64(i)*9000 {
			t.Fatalf("unit %d: DTS %d, want %d", i+1, au.DTS, i*9000)
		}
		reordered = reordered || au.PTS > au.DTS+9000
	}
	if !reordered {
		t.Fatal("no unit presented later than the next one decodes: no B-frames read")
	}
}

// Files whose packets cannot be read are refused with the reason and the file's name.
func TestUnreadableFiles(t *testing.T) {
	ts := testutil.Media(t, "vtest.h264.ts")
	for name, c := range map[string]struct {
		file string
		want string
	}{
		"fragmented MP4": {ffmpeg(t, "frag.mp4", "-t", "3", "-i", ts, "-c", "copy", "-movflags", "+frag_keyframe+empty_moov"), "a fragmented MP4"},
		"Matroska":       {ffmpeg(t, "sample.mkv", "-t", "3", "-i", ts, "-c", "copy"), "neither an MPEG-TS nor an MP4 file"},
		"MP4 of MPEG-4":  {ffmpeg(t, "mpeg4.mp4", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=5:duration=1", "-c:v", "mpeg4"), "no H.264 or H.265 track (found MPEG-4 Visual)"},
		"AVI":            {testutil.Media(t, "vtest.avi"), "neither an MPEG-TS nor an MP4 file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Open(c.file)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), filepath.Base(c.file)) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, filepath.Base(c.file), c.want)
			}
		})
	}
}
