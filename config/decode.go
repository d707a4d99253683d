package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

var (
	configType      = reflect.TypeFor[Config]()
	durationType    = reflect.TypeFor[time.Duration]()
	workerCountType = reflect.TypeFor[WorkerCount]()
)

// schemaWalker checks a YAML node tree against the Go types it will be
// decoded into. Unlike the decoder's own errors, its problems carry the field
// path ("cameras[1].fsp"), not only the line. It also records the line of
// every field path it meets, for Validate.
//
// It also substitutes environment variables (expandEnv) in the values of
// string fields, in place: the tree is then decoded with them.
type schemaWalker struct {
	lines    map[string]int
	problems []Problem
	// lookupEnv finds an environment variable (os.LookupEnv).
	lookupEnv func(string) (string, bool)
	// substituted says that some value of the tree was changed by substitution.
	substituted bool
}

func (s *schemaWalker) add(path string, line int, format string, args ...any) {
	s.problems = append(s.problems, Problem{Field: path, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// walk checks n, found at path, against type t.
func (s *schemaWalker) walk(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode {
		return // the decoder checks aliased content, and bounds its expansion
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // "key:" with no value keeps the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == workerCountType:
		var c WorkerCount
		if isAutoCount(n) {
			delete(s.lines, path) // auto is the count left out: the provider's default
		} else if err := c.UnmarshalYAML(n); err != nil {
			s.add(path, n.Line, "want a whole number or %s, got %s", autoCount, describe(n))
		}

	case t == durationType:
		var d time.Duration
		if n.Kind != yaml.ScalarNode || n.Decode(&d) != nil {
			s.add(path, n.Line, "invalid duration %s (want e.g. 200ms, 5s, 1m30s)", describe(n))
		}

	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			s.add(path, n.Line, "want a mapping of keys, got %s", kindName(n))
			return
		}
		fields := yamlFields(t)
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.ShortTag() == "!!merge" {
				continue // "<<: *anchor": left to the decoder
			}
			p := joinPath(path, k.Value)
			if line, dup := first[k.Value]; dup {
				s.add(p, k.Line, "key %q repeated (first at line %d)", k.Value, line)
				continue
			}
			first[k.Value] = k.Line
			ft, ok := fields[k.Value]
			if !ok {
				s.add(p, k.Line, "unknown key %q (known here: %s)", k.Value, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
				continue
			}
			s.lines[p] = k.Line
			s.walk(v, ft, p)
		}

	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			s.add(path, n.Line, "want a list, got %s", kindName(n))
			return
		}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			s.lines[p] = item.Line
			if item.Kind == yaml.ScalarNode && item.ShortTag() == "!!null" {
				// The decoder would drop it: a list of one "~" is an empty list.
				s.add(p, item.Line, "empty entry (a bare '-' or ~): remove it, or give its value")
				continue
			}
			s.walk(item, t.Elem(), p)
		}

	default: // a leaf: string, bool, int or float
		if n.Kind != yaml.ScalarNode {
			s.add(path, n.Line, "want a single value, got %s", kindName(n))
			return
		}
		v := reflect.New(t)
		err := n.Decode(v.Interface())
		switch t.Kind() {
		case reflect.Bool:
			if err != nil {
				s.add(path, n.Line, "want true or false, got %s", describe(n))
			}
		case reflect.Int:
			// The decoder would silently truncate 2.5 to 2: insist on an integer.
			if err != nil || n.ShortTag() != "!!int" {
				s.add(path, n.Line, "want a whole number, got %s", describe(n))
			}
		case reflect.Float64:
			if err != nil {
				s.add(path, n.Line, "want a number, got %s", describe(n))
			}
		case reflect.String:
			// Any scalar is a valid string. Values of string fields are never
			// echoed: they may hold credentials.
			val, err := expandEnv(n.Value, s.lookupEnv)
			if err != nil {
				s.add(path, n.Line, "%v", err)
			} else if val != n.Value {
				n.Value, n.Tag, n.Style = val, "!!str", yaml.DoubleQuotedStyle
				s.substituted = true
			}
		}
	}
}

// describe names what n holds, for messages. Only scalars of non-string
// fields reach it with their value, so no credentials are echoed.
func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindName(n)
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

// kindName names the kind of n, without its value.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}

// yamlFields maps the YAML keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		fields[name] = f.Type
	}
	return fields
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlLine matches the "line N: " that the yaml package puts before its
// messages.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// yamlProblems turns an error of the yaml package into problems, one per
// message, taking the line out of the text.
func yamlProblems(err error) []Problem {
	var msgs []string
	if te, ok := err.(*yaml.TypeError); ok {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var problems []Problem
	for _, msg := range msgs {
		p := Problem{Msg: strings.TrimPrefix(msg, "yaml: ")}
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Msg = m[2]
		}
		problems = append(problems, p)
	}
	return problems
}
