package config_test

import (
	"strings"
	"testing"

	"github.com/visiond/visiond/config"
)

// Issue 22, item 1: a camera analysed slower than 0.2 fps is valid, with a warning that
// names it and says what it costs; a disabled one, or one at 0.2 fps, is not warned about.
func TestWarningsSlowCamera(t *testing.T) {
	cfg, err := config.Parse([]byte(`cameras:
  - {id: ok, url: rtsp://h/1, fps: 0.2}
  - {id: slow, url: rtsp://h/2, fps: 0.1}
  - {id: off, url: rtsp://h/3, fps: 0.05, enabled: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Warnings()
	if len(got) != 1 || !strings.HasPrefix(got[0], `cameras[1].fps: 0.1 (camera "slow") is below 0.2: an object is tracked only once seen in 3 frames, 20s here`) {
		t.Errorf("warnings %q, want one for camera slow", got)
	}
}
