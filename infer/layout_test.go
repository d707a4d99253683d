package infer

import (
	"slices"
	"strings"
	"testing"
)

func TestDetectLayout(t *testing.T) {
	for _, tc := range []struct {
		shape            []int64
		layout           Layout
		classes, anchors int
		wantErr          string
	}{
		{shape: []int64{1, 84, 8400}, layout: LayoutV8, classes: 80, anchors: 8400},
		{shape: []int64{1, 5, 8400}, layout: LayoutV8, classes: 1, anchors: 8400},
		{shape: []int64{1, 8400, 84}, layout: LayoutV5, classes: 79, anchors: 8400},
		{shape: []int64{1, 25200, 85}, layout: LayoutV5, classes: 80, anchors: 25200},
		{shape: []int64{1, 300, 6}, layout: LayoutE2E, anchors: 300},
		{shape: []int64{1, 6, 6}, layout: LayoutE2E, anchors: 6},
		// A single-class YOLOv5 output has this shape too: read as end-to-end (documented).
		{shape: []int64{1, 25200, 6}, layout: LayoutE2E, anchors: 25200},
		{shape: []int64{1, 7, 8400}, layout: LayoutV8, classes: 3, anchors: 8400},
		{shape: []int64{1, 5, 6}, layout: LayoutV8, classes: 1, anchors: 6},
		{shape: []int64{1, 84, 84}, wantErr: "ambiguous"},
		{shape: []int64{1, 4, 8400}, wantErr: "too few values per anchor"},
		{shape: []int64{1, 8400, 5}, wantErr: "too few values per anchor"},
		{shape: []int64{1, 8400, 4}, wantErr: "too few values per anchor"},
		{shape: []int64{1, -1, 8400}, wantErr: "not static"},
		{shape: []int64{2, 84, 8400}, wantErr: "is not [1,A,B]"},
		{shape: []int64{1, 705600}, wantErr: "is not [1,A,B]"},
		{shape: []int64{1, 84, 8400, 1}, wantErr: "is not [1,A,B]"},
	} {
		l, c, n, err := DetectLayout(tc.shape)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want %q", tc.shape, err, tc.wantErr)
			}
			continue
		}
		if err != nil || l != tc.layout || c != tc.classes || n != tc.anchors {
			t.Errorf("%v: got %v C=%d N=%d err %v, want %v C=%d N=%d", tc.shape, l, c, n, err, tc.layout, tc.classes, tc.anchors)
		}
	}
}

func TestParseNames(t *testing.T) {
	got, err := ParseNames(`{0: 'person', 1: 'bicycle', 2: "teddy's bear", 3: 'traffic light'}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"person", "bicycle", "teddy's bear", "traffic light"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, err := ParseNames("{1: 'b',0:'a' }"); err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("unordered: got %q, %v", got, err)
	}
	for _, tc := range []struct{ in, wantErr string }{
		{"", "not a {id: 'name', ...} dict"},
		{"[0: 'a']", "not a {id: 'name', ...} dict"},
		{"{}", "empty dict"},
		{"{0 'a'}", "has no ':'"},
		{"{x: 'a'}", `class id "x" is not a non-negative integer`},
		{"{-1: 'a'}", `class id "-1"`},
		{"{0: person}", "name of class 0 is not a quoted string"},
		{"{0: 'person}", "name of class 0 has no closing quote"},
		{"{0: 'a' 1: 'b'}", "expected ',' after class 0"},
		{"{0: 'a', 0: 'b'}", "class id 0 appears twice"},
		{"{0: 'a', 2: 'c'}", "class ids are not 0..1 (found 2)"},
	} {
		_, err := ParseNames(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseNames(%q) = %v, want error containing %q", tc.in, err, tc.wantErr)
		}
	}
}
