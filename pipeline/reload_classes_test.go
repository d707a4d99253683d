package pipeline

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/pool"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// The live leaves of config.Config (those reloadClasses applies live), each with a test that
// changes it by a reload and sees the change take effect: liveLeafShows says how, leaf by
// leaf. TestReloadLiveLeavesListed fails on a live leaf without a show and on a show of no
// live leaf, so that a new field is untested until someone classifies it and shows it.

// leafShow is how one live leaf is seen to take effect. Leaves that the daemon applies the
// same way share a mechanism (pool, restarts, reschedules, analyses, inherits), but each has
// its own values and names what it reaches.
type leafShow struct {
	// pool, for a leaf of workers, returns the field of a pool's config
	// (Workers.PoolConfig, what new pools are built from) that the leaf reaches:
	// TestReloadLiveLeavesBuildPools changes the leaf and wants that field changed.
	pool func(pool.Config) any
	// from and to are edits of the daemon's config (leafDaemon.render): the daemon reloads
	// from, then to, which differ in the leaf (and in what it needs with it), and effect
	// sees the change take effect (TestReloadLiveLeaves). nil: no daemon show.
	from, to edit
	effect   func(t *testing.T, h *leafDaemon, s leafStep)
	// in is the leaf of the config as loaded that holds the key's value, when config moves
	// it there ("" is the leaf itself): password_file is read into password.
	in string
	// behaves, for an analytics setting, says what is wrong (or "") with what camera
	// cam published under from's settings and then under to's (analysedAcross).
	behaves func(before, after published) string
}

// liveLeafShows returns the show of every live leaf, by its path in reloadClasses.
func liveLeafShows() map[string]leafShow {
	pc := func(get func(pool.Config) any) leafShow { return leafShow{pool: get} }
	cam := func(keys string) edit { return edit{cam: "$cam, " + keys} }
	restart := func(to edit, get func(*sources.Camera) any) leafShow {
		return leafShow{to: to, effect: restarts(get)}
	}
	settings := func(from, to string) leafShow { return leafShow{from: cam(from), to: cam(to), effect: analyses} }
	defaults := func(from, to string) leafShow {
		return leafShow{from: edit{defaults: from}, to: edit{defaults: to}, effect: inherits}
	}
	zone := func(keys string) string {
		return "zones: [{id: z, polygon: [[0, 0], [1, 0], [1, 0.2], [0, 0.2]]" + keys + "}]"
	}
	line := func(keys string) string { return "lines: [{id: l, points: [[0, 0.1], [1, 0.1]]" + keys + "}]" }
	filter := func(keys string) string { return "objects: {filters: [{" + keys + "}]}" }

	withBehaviour := func(s leafShow, b func(before, after published) string) leafShow {
		s.behaves = b
		return s
	}
	return map[string]leafShow{
		"workers.model":                                 pc(func(c pool.Config) any { return c.Model }),
		"workers.labels":                                pc(func(c pool.Config) any { return c.Labels }),
		"workers.library":                               pc(func(c pool.Config) any { return c.Library }),
		"workers.confidence":                            pc(func(c pool.Config) any { return c.Confidence }),
		"workers.iou":                                   {pool: func(c pool.Config) any { return c.IoU }, to: edit{workers: "iou: 0.5"}, effect: newPools},
		"workers.job_timeout":                           pc(func(c pool.Config) any { return c.JobTimeout }),
		"workers.memory_limit_mib":                      pc(func(c pool.Config) any { return c.MemoryLimit }),
		"workers.gpu_memory_limit_mib":                  pc(func(c pool.Config) any { return c.GPUMemoryLimit }),
		"workers.gpu_memory_command":                    pc(func(c pool.Config) any { return c.GPUMemoryCommand }),
		"workers.pools[].count":                         pc(func(c pool.Config) any { return c.Count }),
		"workers.pools[].provider":                      pc(func(c pool.Config) any { return c.Provider }),
		"workers.pools[].device":                        pc(func(c pool.Config) any { return c.Device }),
		"workers.pools[].sessions":                      pc(func(c pool.Config) any { return c.Sessions }),
		"workers.pools[].threads":                       pc(func(c pool.Config) any { return c.Threads }),
		"workers.pools[].spin":                          pc(func(c pool.Config) any { return c.Spin }),
		"workers.pools[].fallback":                      pc(func(c pool.Config) any { return c.Fallback }),
		"workers.pools[].cuda.gpu_mem_limit_mib":        pc(func(c pool.Config) any { return c.CUDA.GPUMemLimit }),
		"workers.pools[].cuda.arena_extend_strategy":    pc(func(c pool.Config) any { return c.CUDA.ArenaExtendStrategy }),
		"workers.pools[].cuda.cudnn_conv_algo_search":   pc(func(c pool.Config) any { return c.CUDA.CudnnConvAlgoSearch }),
		"workers.pools[].cuda.cudnn_conv_max_workspace": pc(func(c pool.Config) any { return c.CUDA.CudnnConvMaxWorkspace }),
		"workers.pools[].cuda.device_io":                pc(func(c pool.Config) any { return c.CUDA.DeviceIO }),
		"workers.pools[].cuda.graph":                    pc(func(c pool.Config) any { return c.CUDA.Graph }),
		"workers.pools[].tensorrt.fp16":                 pc(func(c pool.Config) any { return c.TensorRT.FP16 }),
		"workers.pools[].tensorrt.int8":                 pc(func(c pool.Config) any { return c.TensorRT.INT8 }),
		"workers.pools[].tensorrt.engine_cache":         pc(func(c pool.Config) any { return c.TensorRT.EngineCache }),
		"workers.pools[].tensorrt.workspace_mib":        pc(func(c pool.Config) any { return c.TensorRT.WorkspaceSize }),

		"pipeline.slice":         {to: edit{pipeline: "slice: 50ms"}, effect: reslices},
		"pipeline.max_frame_age": {to: edit{pipeline: "max_frame_age: 1ns"}, effect: stalesFrames},

		"camera_defaults.fps":                         defaults("", "fps: 2"),
		"camera_defaults.enabled":                     defaults("", "enabled: false"),
		"camera_defaults.transport":                   defaults("", "transport: udp"),
		"camera_defaults.decode":                      defaults("", "decode: keyframes"),
		"camera_defaults.decoder":                     defaults("", "decoder: cuda"),
		"camera_defaults.stall_timeout":               defaults("", "stall_timeout: 7s"),
		"camera_defaults.weight":                      defaults("", "weight: 3"),
		"camera_defaults.objects.track":               defaults("objects: {track: [person, car]}", "objects: {track: [car]}"),
		"camera_defaults.objects.filters[].class":     defaults(filter("class: person, min_score: 0.1"), filter("class: car, min_score: 0.1")),
		"camera_defaults.objects.filters[].min_score": defaults(filter("class: car, min_score: 0.1"), filter("class: car, min_score: 0.6")),
		"camera_defaults.objects.filters[].min_area":  defaults(filter("class: car, min_area: 0.001"), filter("class: car, min_area: 0.002")),
		"camera_defaults.objects.filters[].max_area":  defaults(filter("class: car, max_area: 0.5"), filter("class: car, max_area: 0.4")),
		"camera_defaults.objects.anchor":              defaults("", "objects: {anchor: center}"),
		"camera_defaults.objects.update_interval":     defaults("", "objects: {update_interval: 5s}"),
		"camera_defaults.objects.class_groups":        defaults("", "objects: {class_groups: [[car, truck]]}"),
		"camera_defaults.events.detections":           defaults("", `events: {detections: "off"}`),
		"camera_defaults.clips.enabled":               defaults("", "clips: {enabled: true}"),
		"camera_defaults.clips.pre_capture":           defaults("", "clips: {pre_capture: 2s}"),
		"camera_defaults.clips.post_capture":          defaults("", "clips: {post_capture: 2s}"),
		"camera_defaults.clips.max_length":            defaults("", "clips: {max_length: 1m}"),
		"camera_defaults.clips.classes":               defaults("", "clips: {classes: [person]}"),

		"cameras[].id":      {to: edit{cam: "id: cam2, url: $down"}, effect: renames},
		"cameras[].enabled": {to: cam("enabled: false"), effect: disables},

		"cameras[].kind":     restart(edit{cam: "id: cam, kind: file, file: $media"}, func(s *sources.Camera) any { return s.Kind }),
		"cameras[].url":      restart(edit{cam: "id: cam, url: $down2"}, func(s *sources.Camera) any { return s.URL }),
		"cameras[].username": restart(cam("username: admin"), func(s *sources.Camera) any { return s.Username }),
		"cameras[].password": {from: cam("username: admin, password: one"), to: cam("username: admin, password: two"),
			effect: restarts(func(s *sources.Camera) any { return s.Password })},
		"cameras[].password_file": {from: cam("username: admin, password_file: $secret1"), to: cam("username: admin, password_file: $secret2"),
			in: "cameras[].password", effect: restarts(func(s *sources.Camera) any { return s.Password })},
		"cameras[].pipeline": {from: edit{cam: `id: cam, kind: gstreamer, pipeline: "videotestsrc ! appsink"`},
			to: edit{cam: `id: cam, kind: gstreamer, pipeline: "videotestsrc pattern=ball ! appsink"`}, effect: restarts(func(s *sources.Camera) any { return s.Pipeline })},
		"cameras[].file": {from: edit{cam: "id: cam, kind: file, file: $media"}, to: edit{cam: "id: cam, kind: file, file: $media2"},
			effect: restarts(func(s *sources.Camera) any { return s.File })},
		"cameras[].transport":     restart(cam("transport: udp"), func(s *sources.Camera) any { return s.Transport }),
		"cameras[].decode":        restart(cam("decode: keyframes"), func(s *sources.Camera) any { return s.Decode }),
		"cameras[].decoder":       restart(cam("decoder: cuda"), func(s *sources.Camera) any { return s.Decoder }),
		"cameras[].stall_timeout": restart(cam("stall_timeout: 7s"), func(s *sources.Camera) any { return s.StallTimeout }),

		"cameras[].fps": {to: cam("fps: 2"), effect: reschedules(func(c *camera) any {
			if got := c.analytics().Analytics.FrameInterval; got != 500*time.Millisecond {
				return fmt.Sprintf("the tracker's frame interval %v, not 1/fps", got)
			}
			return c.status().FPS
		})},
		"cameras[].weight": {to: cam("weight: 3"), effect: reschedules(func(c *camera) any { return c.cfg.Weight })}, // what dispatch shares by

		"cameras[].objects.track": withBehaviour(settings("objects: {track: [person, car]}", "objects: {track: [car]}"),
			func(before, after published) string {
				return want(before.detected("person") && !after.detected("person") && after.detected("car"), "the person detected before only, the car throughout")
			}),
		"cameras[].objects.filters[].class": settings(filter("class: person, min_score: 0.1"), filter("class: car, min_score: 0.1")),
		"cameras[].objects.filters[].min_score": withBehaviour(settings(filter("class: car, min_score: 0.1"), filter("class: car, min_score: 0.6")),
			func(before, after published) string { // the car scores 0.5
				return want(before.detected("car") && !after.detected("car") && after.detected("person"), "the car detected before only, the person throughout")
			}),
		"cameras[].objects.filters[].min_area": settings(filter("class: car, min_area: 0.001"), filter("class: car, min_area: 0.002")),
		"cameras[].objects.filters[].max_area": settings(filter("class: car, max_area: 0.5"), filter("class: car, max_area: 0.4")),
		// The masks' test point, the object events' paths and the stationary test
		// (analytics.Motion.SetAnchor, TestMotionSetAnchor) take it.
		"cameras[].objects.anchor":          settings("objects: {anchor: bottom_center}", "objects: {anchor: center}"),
		"cameras[].objects.update_interval": settings("objects: {update_interval: 30s}", "objects: {update_interval: 5s}"),
		"cameras[].objects.class_groups":    settings("objects: {class_groups: []}", "objects: {class_groups: [[car, truck]]}"),
		"cameras[].masks": withBehaviour(settings("masks: [[[0, 0], [0.1, 0], [0.1, 0.1]]]", "masks: [[[0, 0.7], [1, 0.7], [1, 1], [0, 1]]]"),
			func(before, after published) string { // the person's feet are at y 0.8
				return want(before.detected("person") && !after.detected("person") && after.detected("car"), "the person detected before only, the car throughout")
			}),
		"cameras[].zones[].id": settings(zone(""), strings.Replace(zone(""), "id: z", "id: y", 1)),
		"cameras[].zones[].polygon": withBehaviour(settings(zone(""), "zones: [{id: z, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}]"),
			func(before, after published) string {
				return want(len(before.zones) == 0 && after.entered("z", "person"), "no zone event before, the person entering zone z after")
			}),
		"cameras[].zones[].classes":        settings(zone(", classes: [person]"), zone(", classes: [person, car]")),
		"cameras[].zones[].min_seconds":    settings(zone(""), zone(", min_seconds: 0")),
		"cameras[].zones[].loiter_seconds": settings(zone(""), zone(", loiter_seconds: 30")),
		"cameras[].zones[].anchor":         settings(zone(""), zone(", anchor: center")),
		"cameras[].lines[].id":             settings(line(""), strings.Replace(line(""), "id: l", "id: k", 1)),
		"cameras[].lines[].points": withBehaviour(settings(line(""), "lines: [{id: l, points: [[0.5, 0], [0.5, 1]]}]"),
			func(before, after published) string {
				return want(len(before.lines) == 0 && after.crossed("l", "person"), "no line event before, the person crossing line l after")
			}),
		"cameras[].lines[].classes":    settings(line(""), line(", classes: [person]")),
		"cameras[].lines[].band":       settings(line(""), line(", band: 0.05")),
		"cameras[].lines[].anchor":     settings(line(""), line(", anchor: center")),
		"cameras[].clips.enabled":      settings("clips: {enabled: false}", "clips: {enabled: true}"),
		"cameras[].clips.pre_capture":  settings("clips: {pre_capture: 5s}", "clips: {pre_capture: 2s}"),
		"cameras[].clips.post_capture": settings("clips: {post_capture: 5s}", "clips: {post_capture: 2s}"),
		"cameras[].clips.max_length":   settings("clips: {max_length: 2m}", "clips: {max_length: 1m}"),
		"cameras[].clips.classes":      settings("clips: {classes: [person, car]}", "clips: {classes: [person]}"),
		"cameras[].clips.zones":        settings(zone("")+", clips: {zones: []}", zone("")+", clips: {zones: [z]}"),
		"cameras[].events.detections": withBehaviour(settings("events: {detections: all}", `events: {detections: "off"}`),
			func(before, after published) string {
				return want(len(before.dets) > 0 && len(after.dets) == 0, "detection events before only")
			}),
	}
}

// want returns "" when ok, else what was wanted.
func want(ok bool, what string) string {
	if ok {
		return ""
	}
	return "want " + what
}

// liveLeaves returns the leaves of config.Config that reloadClasses applies live.
func liveLeaves() []string {
	var out []string
	eachConfigField(reflect.TypeFor[config.Config](), "", nil, false, func(path string, _ []int) {
		if c, _ := reloadClassOf(path); c == applyLive {
			out = append(out, path)
		}
	})
	return out
}

// Every leaf that reloadClasses applies live has a show in liveLeafShows, and every show is
// of such a leaf: a leaf of workers names the field of the pools' config it reaches, any
// other is shown on the daemon; a show through camera_defaults has one of its camera leaf.
func TestReloadLiveLeavesListed(t *testing.T) {
	shows, live := liveLeafShows(), liveLeaves()
	var leaves []string
	eachConfigField(reflect.TypeFor[config.Config](), "", nil, false, func(path string, _ []int) { leaves = append(leaves, path) })
	if len(live) < 70 {
		t.Fatalf("%d live leaves: the walk is broken", len(live))
	}
	for _, path := range live {
		if _, ok := shows[path]; !ok {
			t.Errorf("%s is applied live (reloadClasses), but liveLeafShows has no test of it: add one that changes it by a reload and sees it take effect, or classify it needRestart", path)
		}
	}
	for _, path := range slices.Sorted(maps.Keys(shows)) {
		s := shows[path]
		switch {
		case !slices.Contains(live, path):
			t.Errorf("liveLeafShows shows %s, which is no leaf of config.Config that reloadClasses applies live", path)
		case strings.HasPrefix(path, "workers.") && s.pool == nil:
			t.Errorf("%s: a leaf of workers names the field of the pools' config it reaches (pool)", path)
		case !strings.HasPrefix(path, "workers.") && (s.pool != nil || s.effect == nil):
			t.Errorf("%s: wants a show on the daemon (effect), and no pool", path)
		case s.behaves != nil && !strings.HasPrefix(path, "cameras[]."):
			t.Errorf("%s: behaves is for a camera's analytics settings", path)
		case s.in != "" && !slices.Contains(leaves, s.in):
			t.Errorf("%s: its value is said to be in %s, which is no leaf of config.Config", path, s.in)
		}
		if strings.HasPrefix(path, "camera_defaults.") {
			cam := "cameras[]." + strings.TrimPrefix(path, "camera_defaults.")
			if c, ok := shows[cam]; !ok || c.effect == nil {
				t.Errorf("%s is shown through %s, which has no show on the daemon", path, cam)
			}
		}
	}
}

// A change of any live leaf of workers reaches the pools' config: a file that changes it
// alone puts it in force, differs from the running workers section (what makes a reload
// start new pools, from the section in force) and gives pools whose config has the new value
// in the field its show names. TestReloadLiveLeaves/workers.iou and TestDaemonReload see
// such pools started and swapped in.
func TestReloadLiveLeavesBuildPools(t *testing.T) {
	running, err := config.Parse([]byte("cameras: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	shows := liveLeafShows()
	for _, path := range slices.Sorted(maps.Keys(shows)) {
		get := shows[path].pool
		if get == nil {
			continue
		}
		t.Run(path, func(t *testing.T) {
			file := *running
			changeValue(t, path, leafOf(t, reflect.ValueOf(&file).Elem(), path, true))
			next, restart := inForce(running, &file)
			if len(restart) != 0 || !reflect.DeepEqual(next.Workers, file.Workers) || reflect.DeepEqual(next.Workers, running.Workers) {
				t.Fatalf("changed alone: needs restart %q, workers in force %+v, want the file's %+v", restart, next.Workers, file.Workers)
			}
			for i := range next.Workers.Pools {
				was, now := get(running.Workers.PoolConfig(i)), get(next.Workers.PoolConfig(i))
				if reflect.DeepEqual(was, now) {
					t.Errorf("pool %d's config holds %v, as before the change", i, now)
				}
			}
		})
	}
}

// Every live leaf that is not of workers (and workers.iou) takes effect on a running daemon
// when a reload changes it: for each, the daemon reloads its show's from config, then its to
// config, after which the config in force holds the new value and the show's effect sees it
// applied (and, for the representative analytics settings, behaves sees what the camera
// publishes change). One daemon, one worker: camera "live" is the sample video, at 1 fps;
// camera "cam", whose server is down, is the one the leaves change.
func TestReloadLiveLeaves(t *testing.T) {
	h := startLeafDaemon(t)
	for _, path := range slices.Sorted(maps.Keys(h.shows)) {
		show := h.shows[path]
		if show.effect == nil {
			continue
		}
		t.Run(path, func(t *testing.T) {
			from, to := h.parse(t, show.from), h.parse(t, show.to)
			leaf := path
			if show.in != "" {
				leaf = show.in
			}
			leaf = strings.Replace(leaf, "cameras[]", "cameras[1]", 1) // cam
			if was, now := leafOf(t, reflect.ValueOf(from).Elem(), leaf, false), leafOf(t, reflect.ValueOf(to).Elem(), leaf, false); reflect.DeepEqual(was.Interface(), now.Interface()) {
				t.Fatalf("from and to hold the same %s: %v", leaf, now)
			}
			h.reload(t, from)
			s := leafStep{path: path, from: from, to: to, pids: pids(h.Daemon)}
			if c := h.camera("cam"); c != nil {
				s.cam, s.src, s.settings = c, c.src, c.analytics()
			}
			s.res = h.reload(t, to)
			got, want := leafOf(t, reflect.ValueOf(h.Running()).Elem(), leaf, false), leafOf(t, reflect.ValueOf(to).Elem(), leaf, false)
			if !reflect.DeepEqual(got.Interface(), want.Interface()) {
				t.Fatalf("%s in force: %v, want the file's %v", leaf, got, want)
			}
			show.effect(t, h, s)
			if show.behaves != nil {
				before, after := analysedAcross(t, from.Cameras[1], to.Cameras[1])
				if msg := show.behaves(before, after); msg != "" {
					t.Errorf("published under from's settings %s, under to's %s: %s", before, after, msg)
				}
			}
		})
	}
}

// edit is what a show changes in the daemon's config, as YAML (flow mappings' contents) with
// the tokens of leafDaemon.render.
type edit struct {
	workers  string // more keys of workers
	pipeline string // the keys of pipeline
	defaults string // the keys of camera_defaults
	cam      string // camera cam's keys; "" is "$cam"
}

// leafDaemon is the daemon of TestReloadLiveLeaves and what renders its configs.
type leafDaemon struct {
	*Daemon
	shows          map[string]leafShow
	stateDir       string
	model, library string
	live           string // camera live's YAML entry
	tokens         *strings.Replacer
}

// startLeafDaemon starts the daemon of TestReloadLiveLeaves on the config of no edit.
func startLeafDaemon(t *testing.T) *leafDaemon {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		testutil.WriteFile(t, p, body)
		return strconv.Quote(p)
	}
	media := testutil.Media(t, "vtest.h264.ts")
	media2 := filepath.Join(dir, "vtest2.h264.ts") // the same video under another name
	if err := os.Symlink(media, media2); err != nil {
		t.Fatal(err)
	}
	down := "rtsp://" + testutil.FreeAddr(t) + "/cam"
	h := &leafDaemon{
		shows:    liveLeafShows(),
		stateDir: t.TempDir(),
		model:    testutil.ThirdParty(t, "yolov8n.onnx"),
		library:  testutil.ThirdParty(t, "libonnxruntime.so.1"),
		live: strings.Replace(sampleCameras(t, 1), "- {id: cam0,",
			"- {id: live, fps: 1, enabled: true, transport: tcp, decode: all, decoder: cpu, stall_timeout: 10s, weight: 1,", 1),
		tokens: strings.NewReplacer( // longer tokens first: $down2 before $down
			"$cam", "id: cam, url: "+strconv.Quote(down),
			"$down2", strconv.Quote(down+"2"),
			"$down", strconv.Quote(down),
			"$media2", strconv.Quote(media2),
			"$media", strconv.Quote(media),
			"$secret1", file("secret1", "one\n"),
			"$secret2", file("secret2", "two\n"),
		),
	}
	h.Daemon = startTestDaemonIn(t, h.render(edit{}), h.stateDir)
	return h
}

// render returns the daemon's config with e, its tokens replaced: $cam is camera cam with an
// RTSP URL nothing listens on ($down; $down2 is another), $media and $media2 name the
// sample video, $secret1 and $secret2 files holding "one" and "two".
func (h *leafDaemon) render(e edit) string {
	workers, cam := "", e.cam
	if e.workers != "" {
		workers = ", " + e.workers
	}
	if cam == "" {
		cam = "$cam"
	}
	return h.tokens.Replace(fmt.Sprintf("site: test\nstate_dir: %q\nhttp: {listen: \"\"}\nnats: {listen: \"127.0.0.1:0\"}\n"+
		"workers: {model: %q, library: %q, pools: [{count: 1}]%s}\npipeline: {%s}\ncamera_defaults: {%s}\ncameras:\n%s  - {%s}\n",
		h.stateDir, h.model, h.library, workers,
		e.pipeline, e.defaults, h.live, cam))
}

// parse parses the config of e, as a file of it would be loaded.
func (h *leafDaemon) parse(t *testing.T, e edit) *config.Config {
	t.Helper()
	yaml := h.render(e)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	return cfg
}

// reload reloads cfg, which changes live leaves only.
func (h *leafDaemon) reload(t *testing.T, cfg *config.Config) ReloadResult {
	t.Helper()
	res, err := h.Reload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NeedsRestart) != 0 {
		t.Fatalf("a reload of live leaves: needs restart %q", res.NeedsRestart)
	}
	return res
}

// leafStep is a show's pair of reloads: what the daemon ran after the reload of from, and
// the result of the reload of to.
type leafStep struct {
	path     string
	from, to *config.Config
	cam      *camera // cam after the reload of from, its source and its settings then
	src      *sources.Camera
	settings *analyticsSettings
	pids     []int // the workers' then
	res      ReloadResult
}

// newPools: new worker pools started and swapped in.
func newPools(t *testing.T, h *leafDaemon, s leafStep) {
	if now := pids(h.Daemon); !s.res.Workers || slices.Equal(now, s.pids) {
		t.Fatalf("workers replaced %v, worker pids %v, before %v: want new pools", s.res.Workers, now, s.pids)
	}
}

// reslices: every camera takes a schedule of the new slice (its slack, how early it may go,
// is half a slice at most), as does the run loop, which reads the slice in force.
func reslices(t *testing.T, h *leafDaemon, s leafStep) {
	c, slice := h.camera("live"), s.to.Pipeline.Slice
	if !slices.Equal(s.res.Updated, []string{"live", "cam"}) || c.sched.slack != min(slice/2, c.sched.interval/4) || h.Running().Pipeline.Slice != slice {
		t.Fatalf("updated %q, live's slack %v, slice in force %v: want both cameras rescheduled to the slice %v",
			s.res.Updated, c.sched.slack, h.Running().Pipeline.Slice, slice)
	}
}

// stalesFrames: max_frame_age 1ns makes the frames of camera live (15 fps, analysed at 1)
// stale: they are counted so, a dozen a second where there were none, and next to none is
// analysed (one in flight at the reload, or one that came during a round: dispatch ages a
// frame from the round's start).
func stalesFrames(t *testing.T, h *leafDaemon, s leafStep) {
	c := h.camera("live")
	st := c.status()
	testutil.WaitFor(t, 2*time.Minute, "frames of camera live counted stale", func() bool {
		return c.status().Drops.Stale >= st.Drops.Stale+10
	})
	now := c.status()
	if stale, analysed := now.Drops.Stale-st.Drops.Stale, now.Analysed-st.Analysed; analysed >= stale {
		t.Fatalf("camera live: %d frames analysed and %d stale since max_frame_age 1ns: want next to none analysed", analysed, stale)
	}
}

// renames: the camera of the old id stops, one of the new id starts.
func renames(t *testing.T, h *leafDaemon, s leafStep) {
	if !slices.Equal(s.res.Removed, []string{"cam"}) || !slices.Equal(s.res.Added, []string{"cam2"}) || h.camera("cam") != nil || h.camera("cam2") == nil {
		t.Fatalf("result %+v: want cam removed and cam2 added", s.res)
	}
}

// disables: the camera stops.
func disables(t *testing.T, h *leafDaemon, s leafStep) {
	if !slices.Equal(s.res.Removed, []string{"cam"}) || h.camera("cam") != nil {
		t.Fatalf("result %+v: want cam stopped", s.res)
	}
}

// restarts: camera cam restarts, on a source built from the camera in force: get of its new
// source is what it is of the source to's camera makes (config.Camera.Source, which
// startCamera uses), and not what it was.
func restarts(get func(*sources.Camera) any) func(t *testing.T, h *leafDaemon, s leafStep) {
	return func(t *testing.T, h *leafDaemon, s leafStep) {
		c := h.camera("cam")
		if c == nil || c.src == s.src || !slices.Equal(s.res.Restarted, []string{"cam"}) {
			t.Fatalf("result %+v: want cam restarted", s.res)
		}
		if got, want, was := get(c.src), get(s.to.Cameras[1].Source()), get(s.src); !reflect.DeepEqual(got, want) || reflect.DeepEqual(got, was) {
			t.Fatalf("the restarted source has %v, want %v (it had %v)", got, want, was)
		}
	}
}

// reschedules: camera cam keeps its session, and get of it is the leaf's new value.
func reschedules(get func(*camera) any) func(t *testing.T, h *leafDaemon, s leafStep) {
	return func(t *testing.T, h *leafDaemon, s leafStep) {
		c := h.camera("cam")
		if c != s.cam || c.src != s.src || !slices.Equal(s.res.Updated, []string{"cam"}) {
			t.Fatalf("result %+v: want cam updated on its session", s.res)
		}
		leaf := strings.TrimPrefix(s.path, "cameras[].")
		if got, want := get(c), leafOf(t, reflect.ValueOf(&s.to.Cameras[1]).Elem(), leaf, false).Interface(); !reflect.DeepEqual(got, want) {
			t.Fatalf("cam has %s %v, want %v", leaf, got, want)
		}
	}
}

// analyses: camera cam keeps its session and takes new analytics settings
// (camera.setAnalytics), which hold the leaf's new value; its scene applies them before its
// next result (analysedAcross sees it).
func analyses(t *testing.T, h *leafDaemon, s leafStep) {
	c := h.camera("cam")
	if c != s.cam || c.src != s.src || !slices.Contains(s.res.Updated, "cam") || slices.Contains(s.res.Restarted, "cam") {
		t.Fatalf("result %+v: want cam updated on its session", s.res)
	}
	a := c.analytics()
	if a == s.settings {
		t.Fatal("cam's analytics settings were not replaced")
	}
	held := config.Camera{Objects: a.Analytics.Objects, Masks: a.Analytics.Masks, Zones: a.Analytics.Zones, Lines: a.Analytics.Lines,
		Events: a.Events, Clips: a.Clips}
	leaf := strings.TrimPrefix(s.path, "cameras[].")
	got, want := leafOf(t, reflect.ValueOf(&held).Elem(), leaf, false), leafOf(t, reflect.ValueOf(&s.to.Cameras[1]).Elem(), leaf, false)
	if !reflect.DeepEqual(got.Interface(), want.Interface()) {
		t.Fatalf("cam's settings in force hold %s %v, want %v", leaf, got, want)
	}
}

// inherits: config resolves the default into camera cam, which does not set the key, and it
// takes effect there as the camera's own leaf does (that leaf's show).
func inherits(t *testing.T, h *leafDaemon, s leafStep) {
	cam := "cameras[]." + strings.TrimPrefix(s.path, "camera_defaults.")
	leaf := strings.Replace(cam, "cameras[]", "cameras[1]", 1)
	got, was := leafOf(t, reflect.ValueOf(s.to).Elem(), leaf, false), leafOf(t, reflect.ValueOf(s.from).Elem(), leaf, false)
	if want := reflect.Indirect(leafOf(t, reflect.ValueOf(s.to).Elem(), s.path, false)); !reflect.DeepEqual(got.Interface(), want.Interface()) ||
		reflect.DeepEqual(got.Interface(), was.Interface()) {
		t.Fatalf("%s resolves to %v (from %v), want the default's %v", leaf, got, was, want)
	}
	s.path = cam
	h.shows[cam].effect(t, h, s)
}

// published is what camera cam published in a part of analysedAcross.
type published struct {
	dets  []*sinks.DetectionEvent
	zones []*sinks.ZoneEvent
	lines []*sinks.LineEvent
}

func (p published) String() string {
	return fmt.Sprintf("%d detection events (%d detections of a person, %d of a car), %d zone events, %d line events",
		len(p.dets), p.count("person"), p.count("car"), len(p.zones), len(p.lines))
}

func (p published) count(label string) int {
	n := 0
	for _, ev := range p.dets {
		for _, d := range ev.Detections {
			if d.Label == label {
				n++
			}
		}
	}
	return n
}

func (p published) detected(label string) bool { return p.count(label) > 0 }

func (p published) entered(zone, label string) bool {
	return slices.ContainsFunc(p.zones, func(ev *sinks.ZoneEvent) bool {
		return ev.Zone == zone && ev.Label == label && ev.Type == "enter"
	})
}

func (p published) crossed(line, label string) bool {
	return slices.ContainsFunc(p.lines, func(ev *sinks.LineEvent) bool { return ev.Line == line && ev.Label == label })
}

// analysedAcross runs a person walking across a 1000x500 frame from left to right at 5 fps,
// its feet at y 0.8 (testutil.WalkerFrames), and a car standing still at the top right (score
// 0.5), through camera cam on the slicer with stand-in workers: under from's analytics
// settings until the person is a third of the way, then under to's, put in force as a reload
// does (camera.setAnalytics). It returns what the camera published under each.
func analysedAcross(t *testing.T, from, to config.Camera) (before, after published) {
	s := newSim(1, 200*time.Millisecond)
	c := newCamera(from, s.slice, s.wakeUp)
	s.sl.cams = []*camera{c}
	times, boxes := testutil.WalkerFrames(s.now, 5)
	car := infer.Detection{Label: "car", ClassID: 2, Score: 0.5, Box: geom.Box{X: 800, Y: 150, W: 80, H: 40}}
	part := func() published { return published{s.events, s.zones, s.lines} }
	for i, at := range times {
		if i == len(times)/3 {
			before = part()
			s.events, s.zones, s.lines = nil, nil, nil
			c.setAnalytics(to)
		}
		c.box.Put(&sources.Frame{Camera: c.cfg.ID, Seq: uint64(i + 1), Captured: at, Received: at, Letterbox: geom.NewLetterbox(1000, 500, 640, 640)})
		s.sl.dispatch(at, time.Second)
		if len(s.w.inflight) != 1 {
			t.Fatalf("frame %d not dispatched", i)
		}
		done := s.w.inflight[0]
		s.w.inflight = nil
		done(infer.Result{Detections: []infer.Detection{{Label: "person", Score: 0.9, Box: boxes[i]}, car}})
	}
	return before, part()
}

// leafOf returns the field at path in v, a struct of config: path is a YAML path as in
// reloadClasses, where "[]" is a list's first element and "[k]" its k-th. With write, each
// list on the way is copied first, so that a change through the result does not reach what
// v shares with another config.
func leafOf(t *testing.T, v reflect.Value, path string, write bool) reflect.Value {
	t.Helper()
	for _, seg := range strings.Split(path, ".") {
		name, index, list := strings.Cut(seg, "[")
		v = fieldByYAML(t, v, name, path)
		if !list {
			continue
		}
		k := 0
		if index = strings.TrimSuffix(index, "]"); index != "" {
			k, _ = strconv.Atoi(index)
		}
		if v.Len() <= k {
			t.Fatalf("%s: %s has no element %d", path, name, k)
		}
		if write {
			c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(c, v)
			v.Set(c)
			v = c
		}
		v = v.Index(k)
	}
	return v
}

// fieldByYAML returns the field of struct v that YAML names name.
func fieldByYAML(t *testing.T, v reflect.Value, name, path string) reflect.Value {
	t.Helper()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		n, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if n == "" {
			n = strings.ToLower(f.Name)
		}
		if f.IsExported() && n == name {
			return v.Field(i)
		}
	}
	t.Fatalf("%s: %s has no field %s", path, v.Type(), name)
	return reflect.Value{}
}
