//go:build !race

package groundtruth

// raceEnabled says whether the tests run under the race detector (ten times slower).
const raceEnabled = false
