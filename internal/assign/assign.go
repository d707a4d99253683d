// Package assign solves the linear assignment problem: the one-to-one matching of the rows
// and columns of a cost matrix with the least total cost. The tracker associates detections
// with tracks by it (analytics/track) and the ground-truth scorer gives truth objects their
// tracks by it (internal/groundtruth's IDF1).
package assign

import "math"

// Min returns, for each row of the n x m cost matrix (row-major), the column
// assigned to it with the least total cost, or -1. Every row is assigned when n <= m,
// every column when n > m. It is the Hungarian method with potentials and shortest
// augmenting paths (Kuhn-Munkres as Jonker and Volgenant arrange it), O(n^2 m) for n <= m.
// Costs must be finite.
func Min(cost []float64, n, m int) []int {
	rowCol := make([]int, n)
	for i := range rowCol {
		rowCol[i] = -1
	}
	if n == 0 || m == 0 {
		return rowCol
	}
	if n > m {
		// Solve the transpose, so that the side assigned in full is the smaller one.
		t := make([]float64, n*m)
		for i := range n {
			for j := range m {
				t[j*n+i] = cost[i*m+j]
			}
		}
		colRow := Min(t, m, n)
		for j, i := range colRow {
			if i >= 0 {
				rowCol[i] = j
			}
		}
		return rowCol
	}
	// 1-based arrays: index 0 of the columns is the virtual column the search starts from.
	u := make([]float64, n+1) // row potentials
	v := make([]float64, m+1) // column potentials
	p := make([]int, m+1)     // p[j]: row assigned to column j (0: none)
	way := make([]int, m+1)   // way[j]: previous column on the shortest path to j
	minv := make([]float64, m+1)
	used := make([]bool, m+1)
	for i := 1; i <= n; i++ {
		p[0] = i
		j0 := 0
		for j := range minv {
			minv[j] = math.Inf(1)
			used[j] = false
		}
		for {
			used[j0] = true
			i0 := p[j0]
			delta := math.Inf(1)
			j1 := 0
			row := cost[(i0-1)*m:]
			for j := 1; j <= m; j++ {
				if used[j] {
					continue
				}
				if cur := row[j-1] - u[i0] - v[j]; cur < minv[j] {
					minv[j] = cur
					way[j] = j0
				}
				if minv[j] < delta {
					delta = minv[j]
					j1 = j
				}
			}
			for j := 0; j <= m; j++ {
				if used[j] {
					u[p[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if p[j0] == 0 {
				break
			}
		}
		// Flip the augmenting path.
		for j0 != 0 {
			j1 := way[j0]
			p[j0] = p[j1]
			j0 = j1
		}
	}
	for j := 1; j <= m; j++ {
		if p[j] > 0 {
			rowCol[p[j]-1] = j - 1
		}
	}
	return rowCol
}
