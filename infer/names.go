package infer

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseNames parses Ultralytics' "names" metadata, a Python dict literal such as
// "{0: 'person', 1: 'bicycle'}", into names indexed by class id. Ids must be 0..n-1.
func ParseNames(s string) ([]string, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("metadata names: "+format, a...)
	}
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, bad("not a {id: 'name', ...} dict: %.40q", s)
	}
	rest := strings.TrimSpace(s[1 : len(s)-1])
	byID := map[int]string{}
	for rest != "" {
		colon := strings.IndexByte(rest, ':')
		if colon < 0 {
			return nil, bad("entry %.20q has no ':'", rest)
		}
		id, err := strconv.Atoi(strings.TrimSpace(rest[:colon]))
		if err != nil || id < 0 {
			return nil, bad("class id %q is not a non-negative integer", strings.TrimSpace(rest[:colon]))
		}
		rest = strings.TrimLeft(rest[colon+1:], " \t\n")
		if rest == "" || (rest[0] != '\'' && rest[0] != '"') {
			return nil, bad("name of class %d is not a quoted string", id)
		}
		q := rest[0]
		end := strings.IndexByte(rest[1:], q)
		if end < 0 {
			return nil, bad("name of class %d has no closing quote", id)
		}
		if _, dup := byID[id]; dup {
			return nil, bad("class id %d appears twice", id)
		}
		byID[id] = rest[1 : 1+end]
		rest = strings.TrimSpace(rest[2+end:])
		if rest != "" {
			if rest[0] != ',' {
				return nil, bad("expected ',' after class %d, got %.20q", id, rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	if len(byID) == 0 {
		return nil, bad("empty dict")
	}
	names := make([]string, len(byID))
	for id, name := range byID {
		if id >= len(names) {
			return nil, bad("class ids are not 0..%d (found %d)", len(names)-1, id)
		}
		names[id] = name
	}
	return names, nil
}
