package cmem

import "testing"

func TestTune(t *testing.T) {
	t.Setenv("MALLOC_ARENA_MAX", "")
	t.Setenv("MALLOC_MMAP_THRESHOLD_", "")
	if !Tune() {
		t.Fatal("glibc refused the arena bound or the mapping threshold")
	}
	Trim()
}
