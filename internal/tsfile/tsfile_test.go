package tsfile

import (
	"errors"
	"io"
	"path/filepath"
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
	if err == nil || !strings.Contains(err.Error(), "not an MPEG-TS file") || !strings.Contains(err.Error(), "messi5.jpg") {
		t.Fatalf("err = %v", err)
	}
	_, err = Open(filepath.Join(t.TempDir(), "missing.ts"))
	if err == nil || !strings.Contains(err.Error(), "missing.ts") {
		t.Fatalf("err = %v", err)
	}
}
