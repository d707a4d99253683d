package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

const editFile = `# the site's cameras
site: lab
cameras:
  # the front door
  - id: door
    url: rtsp://10.0.0.5/stream1 # main stream
    zones:
      # where people wait
      - id: lower
        polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]
        min_seconds: 2 # slow walkers
      - id: gone
        polygon: [[0, 0], [0.2, 0], [0.2, 0.2]]
    lines:
      - {id: gate, points: [[0.5, 0], [0.5, 1]], classes: [person]}
  - id: yard # the back
    url: rtsp://10.0.0.6/stream1
    zones: [{id: grass, polygon: [[0, 0], [1, 0], [1, 1]]}]
`

// An edit changes the camera's zones, lines and masks only: a zone kept by id keeps its
// other settings and comments, a new one is added, one left out goes; the rest of the file
// keeps its comments, order and values.
func TestEditScene(t *testing.T) {
	t.Chdir(testutil.ModuleRoot(t)) // Validate checks the default model's and library's files
	person := []string{"person"}
	none := []string{}
	edit := config.Scene{
		Zones: []config.Shape{
			{ID: "lower", Points: analytics.Points{{0, 0.6}, {1, 0.6}, {1, 1}, {0, 1}}},
			{ID: "upper", Points: analytics.Points{{0, 0}, {1, 0}, {1, 0.4}}, Classes: &person},
		},
		Lines: []config.Shape{{ID: "gate", Points: analytics.Points{{0.25, 0}, {0.75, 1}}, Classes: &none}},
		Masks: []config.Shape{{Points: analytics.Points{{0.9, 0}, {1, 0}, {1, 0.1}}}},
	}
	text, entry, err := config.EditScene([]byte(editFile), "door", edit)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Validate(text)
	if err != nil {
		t.Fatalf("the edited file does not validate: %v\n%s", err, text)
	}
	door, yard := cfg.Cameras[0], cfg.Cameras[1]
	if len(door.Zones) != 2 || door.Zones[0].ID != "lower" || door.Zones[1].ID != "upper" {
		t.Fatalf("zones %+v, want lower and upper", door.Zones)
	}
	if got := door.Zones[0]; !reflect.DeepEqual(got.Polygon, edit.Zones[0].Points) || got.MinSeconds == nil || *got.MinSeconds != 2 {
		t.Errorf("lower: %+v, want the new polygon and its min_seconds kept", got)
	}
	if got := door.Zones[1]; !reflect.DeepEqual(got.Classes, person) {
		t.Errorf("upper: classes %v, want [person]", got.Classes)
	}
	if len(door.Lines) != 1 || len(door.Lines[0].Classes) != 0 || !reflect.DeepEqual(door.Lines[0].Points, edit.Lines[0].Points) {
		t.Errorf("lines %+v, want gate moved, its classes removed", door.Lines)
	}
	if len(door.Masks) != 1 || !reflect.DeepEqual(door.Masks[0], edit.Masks[0].Points) {
		t.Errorf("masks %v, want the one given", door.Masks)
	}
	before, err := config.Parse([]byte(editFile))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(yard, before.Cameras[1]) || cfg.Site != "lab" || door.URL != before.Cameras[0].URL {
		t.Errorf("the rest of the file changed: yard %+v, site %q, door's url %q", yard, cfg.Site, door.URL)
	}
	for _, c := range []string{"# the site's cameras", "# the front door", "# main stream", "# where people wait", "# slow walkers", "# the back"} {
		if !strings.Contains(string(text), c) {
			t.Errorf("comment %q lost:\n%s", c, text)
		}
	}
	if strings.Index(string(text), "id: door") > strings.Index(string(text), "id: yard") {
		t.Errorf("cameras reordered:\n%s", text)
	}
	if !strings.HasPrefix(string(entry), "# the front door\nid: door\n") || strings.Contains(string(entry), "yard") {
		t.Errorf("the camera's entry:\n%s", entry)
	}
	if scene, err := config.SceneOf(text, "door"); err != nil || len(scene.Zones) != 2 || *scene.Zones[1].Classes == nil || len(scene.Masks) != 1 {
		t.Errorf("SceneOf the edited file: %+v, %v", scene, err)
	}

	// No zones, lines or masks: the keys go.
	text, _, err = config.EditScene([]byte(editFile), "door", config.Scene{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := config.Validate(text); err != nil || len(cfg.Cameras[0].Zones)+len(cfg.Cameras[0].Lines) != 0 || len(cfg.Cameras[1].Zones) != 1 {
		t.Errorf("cleared: %v\n%s", err, text)
	}
}

// Bad edits: a camera the file does not list, an id given twice, and an edit that makes the
// file invalid (Validate names the field and the line, as check does).
func TestEditSceneBadInput(t *testing.T) {
	t.Chdir(testutil.ModuleRoot(t))
	if _, _, err := config.EditScene([]byte(editFile), "garage", config.Scene{}); !errors.Is(err, config.ErrNoSuchCamera) {
		t.Errorf("unknown camera: %v, want ErrNoSuchCamera", err)
	}
	if _, err := config.SceneOf([]byte(editFile), "garage"); !errors.Is(err, config.ErrNoSuchCamera) {
		t.Errorf("SceneOf an unknown camera: %v", err)
	}
	twice := config.Scene{Zones: []config.Shape{{ID: "a", Points: analytics.Points{{0, 0}, {1, 0}, {1, 1}}}, {ID: "a", Points: analytics.Points{{0, 0}, {1, 0}, {0, 1}}}}}
	if _, _, err := config.EditScene([]byte(editFile), "door", twice); err == nil || !strings.Contains(err.Error(), `id "a" given twice`) {
		t.Errorf("an id twice: %v", err)
	}
	for _, bad := range []string{"", "cameras: [", "- a\n- b\n", "site: lab\n"} {
		if _, _, err := config.EditScene([]byte(bad), "door", config.Scene{}); err == nil {
			t.Errorf("EditScene(%q): no error", bad)
		}
	}
	invalid := config.Scene{Zones: []config.Shape{{ID: "flat", Points: analytics.Points{{0, 0}, {1, 1}}}},
		Lines: []config.Shape{{ID: "bad id!", Points: analytics.Points{{0, 0}, {2, 1}}}}}
	text, _, err := config.EditScene([]byte(editFile), "door", invalid)
	if err != nil {
		t.Fatal(err)
	}
	_, err = config.Validate(text)
	var ce *config.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cameras[0].zones[0].polygon") || !strings.Contains(err.Error(), "cameras[0].lines[0]") {
		t.Errorf("invalid edit: %v, want problems naming the zone's polygon and the line", err)
	}
	for _, p := range ce.Problems {
		if p.Line == 0 {
			t.Errorf("problem %q without its line", p)
		}
	}
}

// WriteFile replaces the file atomically with the old one's mode, through a symbolic link to
// the file it leads to, leaving nothing else in the folder.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.yaml")
	if err := os.WriteFile(real, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "visiond.yaml")
	if err := os.Symlink("real.yaml", link); err != nil {
		t.Fatal(err)
	}
	if err := config.WriteFile(link, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(real); err != nil || string(data) != "new\n" {
		t.Errorf("the file: %q, %v", data, err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", st, err)
	}
	if st, err := os.Stat(real); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", st.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("the folder holds %d entries, want the file and the link", len(entries))
	}
	if err := config.WriteFile(filepath.Join(dir, "missing.yaml"), []byte("x")); err == nil {
		t.Error("WriteFile of a missing file: no error")
	}
	if config.Version([]byte("a")) == config.Version([]byte("b")) || len(config.Version(nil)) != 16 {
		t.Error("Version does not tell texts apart")
	}
}
