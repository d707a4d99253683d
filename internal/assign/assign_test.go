package assign

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestMinOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		n, m := 1+rng.IntN(6), 1+rng.IntN(6)
		cost := make([]float64, n*m)
		for i := range cost {
			cost[i] = math.Round(rng.Float64()*100) / 10 // ties included
		}
		got := Min(cost, n, m)
		used := map[int]bool{}
		sum, assigned := 0.0, 0
		for i, j := range got {
			if j < 0 {
				continue
			}
			if used[j] {
				t.Fatalf("trial %d: column %d assigned twice: %v", trial, j, got)
			}
			used[j] = true
			sum += cost[i*m+j]
			assigned++
		}
		if assigned != min(n, m) {
			t.Fatalf("trial %d: %d of %dx%d assigned", trial, assigned, n, m)
		}
		if best := bruteForce(cost, n, m); math.Abs(sum-best) > 1e-9 {
			t.Fatalf("trial %d (%dx%d): total %v, optimum %v; cost %v, got %v", trial, n, m, sum, best, cost, got)
		}
	}
}

// bruteForce returns the least total cost of assigning min(n, m) pairs.
func bruteForce(cost []float64, n, m int) float64 {
	best := math.Inf(1)
	used := make([]bool, m)
	var rec func(i, left int, sum float64)
	rec = func(i, left int, sum float64) {
		if left == 0 {
			best = min(best, sum)
			return
		}
		if n-i < left {
			return
		}
		rec(i+1, left, sum) // row i unassigned (when n > m)
		for j := range m {
			if !used[j] {
				used[j] = true
				rec(i+1, left-1, sum+cost[i*m+j])
				used[j] = false
			}
		}
	}
	rec(0, min(n, m), 0)
	return best
}
