package track

import "github.com/visiond/visiond/internal/assign"

// matcher solves the gated assignment of one association stage, reusing its buffers
// across stages and frames.
//
// Semantics (those of lapjv with a cost limit, as ByteTrack uses it): a pair may match
// only when its cost is below limit, and leaving a track and a detection both unmatched
// costs limit. The assignment minimises the total, so a good match is never given up to
// make two poor ones. Clamping every cost at limit in a rectangular assignment gives
// exactly that objective (an assigned pair at cost limit is an unmatched pair), and pairs
// at the limit are dropped from the result.
//
// The gated pairs form a sparse bipartite graph: a track overlaps one or two detections,
// not all of them. The matcher splits it into connected components and solves each one
// alone, so the cost is that of the largest cluster of objects, not of the whole frame.
type matcher struct {
	cost   []float64 // nr x nc, row-major; >= limit means not allowed
	parent []int     // union-find over nr rows then nc columns
	sub    []float64
	rows   []int
	cols   []int
	comp   []int // root of each node
	start  []int // nodes of root r: order[start[r]:start[r+1]]
	order  []int
	fill   []int
}

// reset prepares an nr x nc problem with every pair not allowed.
func (m *matcher) reset(nr, nc int, limit float64) {
	m.cost = grow(m.cost, nr*nc)
	for i := range m.cost {
		m.cost[i] = limit
	}
	m.parent = growInt(m.parent, nr+nc)
	for i := range m.parent {
		m.parent[i] = i
	}
}

func (m *matcher) find(x int) int {
	for m.parent[x] != x {
		m.parent[x] = m.parent[m.parent[x]]
		x = m.parent[x]
	}
	return x
}

// allow sets the cost of pair (r, c), which must be below the limit.
func (m *matcher) allow(nc, r, c int, cost float64) {
	m.cost[r*nc+c] = cost
	a, b := m.find(r), m.find(len(m.parent)-nc+c)
	if a != b {
		m.parent[a] = b
	}
}

// solve assigns rows to columns and calls match for each pair kept.
func (m *matcher) solve(nr, nc int, limit float64, match func(r, c int)) {
	// Bucket the nodes by component: count per root, prefix sums, fill (a counting sort,
	// so that the components come in the order of their roots and the nodes in order).
	n := nr + nc
	m.start = growInt(m.start, n+1)
	clear(m.start)
	m.comp = growInt(m.comp, n)
	for x := range n {
		m.comp[x] = m.find(x)
		m.start[m.comp[x]+1]++
	}
	for i := 1; i <= n; i++ {
		m.start[i] += m.start[i-1]
	}
	m.order = growInt(m.order, n)
	m.fill = append(m.fill[:0], m.start[:n]...)
	for x := range n {
		root := m.comp[x]
		m.order[m.fill[root]] = x
		m.fill[root]++
	}
	for root := range n {
		nodes := m.order[m.start[root]:m.start[root+1]]
		if len(nodes) < 2 {
			continue // a lone row or column: nothing to match
		}
		m.rows, m.cols = m.rows[:0], m.cols[:0]
		for _, x := range nodes {
			if x < nr {
				m.rows = append(m.rows, x)
			} else {
				m.cols = append(m.cols, x-nr)
			}
		}
		if len(m.rows) == 1 && len(m.cols) == 1 {
			if m.cost[m.rows[0]*nc+m.cols[0]] < limit {
				match(m.rows[0], m.cols[0])
			}
			continue
		}
		sr, sc := len(m.rows), len(m.cols)
		m.sub = grow(m.sub, sr*sc)
		for i, r := range m.rows {
			for j, c := range m.cols {
				m.sub[i*sc+j] = m.cost[r*nc+c]
			}
		}
		for i, j := range assign.Min(m.sub, sr, sc) {
			if j >= 0 && m.sub[i*sc+j] < limit {
				match(m.rows[i], m.cols[j])
			}
		}
	}
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

func growInt(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}
