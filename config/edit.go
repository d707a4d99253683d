package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/visiond/visiond/analytics"
)

// Shape is a zone, a line or a mask as the status page's editor draws it: an id (none for a
// mask), its points (a zone's polygon, a line's two ends, a mask's polygon; fractions of the
// frame) and, for a zone or a line, its classes. Classes nil keeps what the file says; an
// empty list removes the key (every tracked class).
type Shape struct {
	ID      string           `json:"id,omitempty"`
	Points  analytics.Points `json:"points"`
	Classes *[]string        `json:"classes,omitempty"`
}

// Scene is a camera's zones, lines and masks, whole: what an edit sets them to.
type Scene struct {
	Zones []Shape `json:"zones"`
	Lines []Shape `json:"lines"`
	Masks []Shape `json:"masks"`
}

// SceneOf reads camera's zones, lines and masks from a config file's text, as the editor
// shows them (the file's, not the running daemon's: the editor edits the file).
func SceneOf(data []byte, camera string) (Scene, error) {
	cfg, err := parse(data, true)
	if err != nil {
		return Scene{}, err
	}
	for _, c := range cfg.Cameras {
		if c.ID != camera {
			continue
		}
		s := Scene{Zones: []Shape{}, Lines: []Shape{}, Masks: []Shape{}}
		classes := func(cl []string) *[]string {
			cl = append([]string{}, cl...) // [] rather than null: every class
			return &cl
		}
		for _, z := range c.Zones {
			s.Zones = append(s.Zones, Shape{ID: z.ID, Points: z.Polygon, Classes: classes(z.Classes)})
		}
		for _, l := range c.Lines {
			s.Lines = append(s.Lines, Shape{ID: l.ID, Points: l.Points, Classes: classes(l.Classes)})
		}
		for _, m := range c.Masks {
			s.Masks = append(s.Masks, Shape{Points: m})
		}
		return s, nil
	}
	return Scene{}, fmt.Errorf("%w: %q", ErrNoSuchCamera, camera)
}

// ErrNoSuchCamera is EditScene's and SceneOf's error for a camera the file does not list.
var ErrNoSuchCamera = errors.New("no camera of that id in the config file")

// EditScene returns data, a config file's text, with camera's zones, lines and masks set to
// s, and the camera's entry alone in the new text (for the editor to show). It changes only
// those keys: a zone or line of s whose id the camera has keeps its other settings (debounce,
// band, anchor...) and comments, with its points (and classes, when given) replaced; one
// with a new id is added; the camera's zones and lines not in s go; the masks are replaced
// whole. The rest of the file keeps its comments and order (yaml.v3 writes it again, with
// two-space indentation). It does not validate the result: Validate does, as check would.
func EditScene(data []byte, camera string, s Scene) (text, entry []byte, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, newError(yamlProblems(err))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, errors.New("the config file is not a mapping of settings")
	}
	_, cams := mapGet(doc.Content[0], "cameras")
	if cams == nil || cams.Kind != yaml.SequenceNode {
		return nil, nil, errors.New(`the config file has no list of cameras ("cameras:")`)
	}
	var cam *yaml.Node
	for _, c := range cams.Content {
		if c.Kind != yaml.MappingNode {
			continue
		}
		if _, id := mapGet(c, "id"); id != nil && id.Kind == yaml.ScalarNode && id.Value == camera {
			cam = c
			break
		}
	}
	if cam == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrNoSuchCamera, camera)
	}
	if err := editShapes(cam, "zones", "polygon", s.Zones); err != nil {
		return nil, nil, err
	}
	if err := editShapes(cam, "lines", "points", s.Lines); err != nil {
		return nil, nil, err
	}
	masks := make([]*yaml.Node, len(s.Masks))
	for i, m := range s.Masks {
		masks[i] = pointsNode(m.Points)
	}
	setList(cam, "masks", masks)
	if text, err = encodeNode(&doc); err != nil {
		return nil, nil, err
	}
	if entry, err = encodeNode(cam); err != nil {
		return nil, nil, err
	}
	return text, entry, nil
}

// editShapes sets cam's list key (zones, lines) to shapes, each's points under pointsKey.
func editShapes(cam *yaml.Node, key, pointsKey string, shapes []Shape) error {
	_, list := mapGet(cam, key)
	old := map[string]*yaml.Node{}
	if list != nil && list.Kind == yaml.SequenceNode {
		for _, item := range list.Content {
			if _, id := mapGet(item, "id"); item.Kind == yaml.MappingNode && id != nil {
				old[id.Value] = item
			}
		}
	}
	items := make([]*yaml.Node, 0, len(shapes))
	seen := map[string]bool{}
	for _, sh := range shapes {
		if seen[sh.ID] {
			return fmt.Errorf("%s: id %q given twice", key, sh.ID)
		}
		seen[sh.ID] = true
		item := old[sh.ID]
		if item == nil || sh.ID == "" {
			item = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			mapSet(item, "id", scalar(sh.ID, "!!str"))
		}
		mapSet(item, pointsKey, pointsNode(sh.Points))
		if sh.Classes != nil {
			if len(*sh.Classes) == 0 {
				mapDel(item, "classes")
			} else {
				cl := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
				for _, c := range *sh.Classes {
					cl.Content = append(cl.Content, scalar(c, "!!str"))
				}
				mapSet(item, "classes", cl)
			}
		}
		items = append(items, item)
	}
	setList(cam, key, items)
	return nil
}

// setList sets m's key to a sequence of items, keeping the key's comments; no items removes
// the key.
func setList(m *yaml.Node, key string, items []*yaml.Node) {
	if len(items) == 0 {
		mapDel(m, key)
		return
	}
	_, old := mapGet(m, key)
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
	if old != nil {
		seq.HeadComment, seq.LineComment, seq.FootComment = old.HeadComment, old.LineComment, old.FootComment
	}
	mapSet(m, key, seq)
}

// pointsNode is points as a flow sequence of [x, y] pairs: [[0.1, 0.2], [0.3, 0.4]].
func pointsNode(points analytics.Points) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, p := range points {
		pair := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, v := range p {
			pair.Content = append(pair.Content, scalar(strconv.FormatFloat(v, 'f', -1, 64), "")) // plain: 0, 0.25
		}
		n.Content = append(n.Content, pair)
	}
	return n
}

func scalar(value, tag string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// mapGet returns mapping m's key and value nodes for key, or nils.
func mapGet(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// mapSet sets mapping m's key to value, in place when the key is there, else at the end.
func mapSet(m *yaml.Node, key string, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = value
			return
		}
	}
	m.Content = append(m.Content, scalar(key, "!!str"), value)
}

// mapDel removes key from mapping m.
func mapDel(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// encodeNode writes n as YAML with two-space indentation.
func encodeNode(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Validate checks a config file's text as `visiond check` does: it parses as the file would
// load (cameras listed, every setting valid) and the files it names are there.
func Validate(data []byte) (*Config, error) {
	cfg, err := parse(data, true)
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckFiles(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Version is a short digest of a config file's text: the editor's precondition that the
// file is still the one it read (HTTP's ETag, If-Match).
func Version(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// WriteFile replaces the file at path (or, when path is a symbolic link, the file it leads
// to) with data atomically: a new file in the same folder, written and synced, given the old
// file's mode, renamed over it, and the folder synced. A reader, and the daemon's watcher,
// see the old text or the new one, never a part.
func WriteFile(path string, data []byte) error {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	st, err := os.Stat(target)
	if err != nil {
		return err
	}
	dir := filepath.Dir(target)
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename: nothing there
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(st.Mode().Perm()); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
