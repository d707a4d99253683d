package track

import "math"

// axis is a constant-velocity Kalman filter on one coordinate of a box (centre x, centre y,
// width or height) and its rate of change, in pixels and pixels per second.
//
// The tracker's state is (cx, cy, w, h) with their velocities, observed directly (H picks
// the four positions), with diagonal measurement noise and process noise independent per
// coordinate. Its covariance then stays block-diagonal: four independent 2x2 blocks, one
// per coordinate. So four of these filters are the same filter as the 8-dimensional one,
// exactly, at a fraction of the cost (no 8x8 products, no matrix inverse).
//
// The process model is white-noise acceleration: over a time step dt the velocity takes
// a random change of variance q*dt and the position q*dt^3/3, correlated q*dt^2/2. That is
// what makes the filter mean the same at 2 and at 10 frames per second, and across skipped
// frames: the uncertainty grows with the real time elapsed, not with the frame count.
type axis struct {
	p, v    float64 // position and velocity
	a, b, c float64 // covariance [[a b] [b c]] of (p, v)
}

// init starts the filter at measurement z with velocity 0: position variance r
// (the measurement's), velocity variance vv (the prior on how fast objects move).
func (k *axis) init(z, r, vv float64) {
	*k = axis{p: z, a: r, c: vv}
}

// predict moves the filter dt seconds ahead with acceleration spectral density q.
func (k *axis) predict(dt, q float64) {
	if dt <= 0 {
		return
	}
	dt2 := dt * dt
	k.p += k.v * dt
	k.a += 2*k.b*dt + k.c*dt2 + q*dt2*dt/3
	k.b += k.c*dt + q*dt2/2
	k.c += q * dt
}

// innovation returns the difference between measurement z and the prediction, and its
// variance under measurement noise r.
func (k *axis) innovation(z, r float64) (y, s float64) {
	return z - k.p, k.a + r
}

// update corrects the filter with measurement z of noise variance r.
func (k *axis) update(z, r float64) {
	y, s := k.innovation(z, r)
	k0, k1 := k.a/s, k.b/s
	k.p += k0 * y
	k.v += k1 * y
	// P' = (I - K H) P, written out for the 2x2 case; symmetric by construction.
	a, b, c := k.a, k.b, k.c
	k.a = a * (1 - k0)
	k.b = b * (1 - k0)
	k.c = c - k1*b
}

// scale multiplies the state by s (a change of frame resolution).
func (k *axis) scale(s float64) {
	k.p *= s
	k.v *= s
	k.a *= s * s
	k.b *= s * s
	k.c *= s * s
}

// stopRate zeroes the velocity and its uncertainty's correlation: used on the size
// coordinates of a lost track, whose predicted box should not shrink or grow without
// evidence.
func (k *axis) stopRate() {
	k.v = 0
	k.b = 0
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
