package sources

import (
	"time"
)

// The GPU decoder's fallback. A GPU decodes only so many streams at once: on the H100 and
// H200 a process opens at most 285 NVDEC decoders, and past that every open fails. A
// session of a camera on decoder cuda whose GPU decoder does not open (it cannot be made at
// the session's start, or its first decodes fail fallbackAfter times in a row, each at a
// keyframe) goes on with a CPU decoder in its place, so that the cameras past the GPU's
// limit are decoded rather than starved, taking turns with their neighbours; Status says so
// (Decoder, DecoderFallback, DecoderFallbacks). Every gpuRetryEvery, at a keyframe, the
// session tries the GPU again, and keeps the CPU decoder until the GPU's has decoded.

// fallbackAfter is how many failed opens of a session's GPU decoder in a row (each at a
// keyframe) send it to the CPU: one could be a damaged keyframe.
const fallbackAfter = 3

// gpuRetryEvery is how long a session decodes on the CPU before it tries the GPU again.
const gpuRetryEvery = 5 * time.Minute

// decoderUse is the decoder a camera's session decodes with, and why it is not the
// configured one ("" when it is).
type decoderUse struct {
	decoder Decoder
	why     string
}

// openDecoder opens a session's decoder for codec: the camera's, or, when that is the GPU's
// and cannot be made, the CPU's in its place, with gpuErr saying why.
func (c *Camera) openDecoder(codec string) (dec *decoder, gpuErr, err error) {
	dec, err = c.newDecoder(codec, c.Decoder)
	if err == nil || c.Decoder != DecoderCUDA {
		return dec, nil, err
	}
	cpu, cpuErr := c.newDecoder(codec, DecoderCPU)
	if cpuErr != nil {
		return nil, nil, err
	}
	return cpu, err, nil
}

// newDecoder returns a decoder of kind hw for codec that scales with the camera's Scalers.
func (c *Camera) newDecoder(codec string, hw Decoder) (*decoder, error) {
	d, err := newDecoder(codec, hw)
	if err != nil {
		return nil, err
	}
	d.scalers = c.scalers
	return d, nil
}

// gpuRetryEvery is the camera's wait before a session on the CPU tries the GPU again.
func (c *Camera) gpuRetryEvery() time.Duration {
	if c.gpuRetry > 0 {
		return c.gpuRetry
	}
	return gpuRetryEvery
}

// useConfigured makes dec, the camera's configured decoder, the loop's: gated and fallible
// when it is the GPU's.
func (l *decodeLoop) useConfigured(dec *decoder) {
	c := l.cam
	l.dec, l.opened, l.fellBack = dec, false, false
	l.fallible = c.Decoder == DecoderCUDA || c.gateCPU
	l.gate = nil
	if c.DecoderGate != nil && l.fallible {
		l.gate = c.DecoderGate
	}
	c.decoderUse.Store(&decoderUse{decoder: c.Decoder})
}

// onCPU makes cpu, a CPU decoder, the loop's in place of the GPU's, which failed with why.
func (l *decodeLoop) onCPU(cpu *decoder, why error) {
	c := l.cam
	l.dec, l.gate, l.opened, l.openFails = cpu, nil, false, 0
	l.fallible, l.fellBack = false, true
	l.retryAt = time.Now().Add(c.gpuRetryEvery())
	c.fallbacks.Add(1)
	c.decoderUse.Store(&decoderUse{decoder: DecoderCPU, why: why.Error()})
	c.log.Warn("the GPU decoder did not open: decoding on the CPU", "error", why.Error(), "gpu_retry_in", c.gpuRetryEvery())
}

// fallBack moves the loop to a CPU decoder after its GPU decoder's open failed with err, once
// that has happened fallbackAfter times in a row (at once when a retry's open fails). It
// reports whether it did.
func (l *decodeLoop) fallBack(err error) bool {
	if !l.fallible {
		return false
	}
	if l.openFails++; l.openFails < fallbackAfter && l.spare == nil {
		return false
	}
	cpu := l.spare
	l.spare = nil
	if cpu == nil {
		var cpuErr error
		if cpu, cpuErr = l.cam.newDecoder(l.codec, DecoderCPU); cpuErr != nil {
			l.errLog.warn(l.cam.log, "the GPU decoder did not open, nor a CPU decoder in its place", "error", err.Error(), "cpu_error", cpuErr.Error())
			return false
		}
	}
	l.dec.close()
	l.onCPU(cpu, err)
	return true
}

// retryGPU tries the GPU again, at a keyframe, once the loop has decoded on the CPU for
// gpuRetryEvery: a new GPU decoder becomes the loop's, the CPU's kept as spare until the
// new one has decoded (decoded) or failed to open (fallBack).
func (l *decodeLoop) retryGPU(now time.Time) {
	if !l.fellBack || now.Before(l.retryAt) {
		return
	}
	c := l.cam
	gpu, err := c.newDecoder(l.codec, c.Decoder)
	if err != nil {
		l.retryAt = now.Add(c.gpuRetryEvery())
		c.decoderUse.Store(&decoderUse{decoder: DecoderCPU, why: err.Error()})
		c.log.Debug("the GPU decoder still cannot be made: decoding on the CPU", "error", err.Error())
		return
	}
	l.spare = l.dec
	l.useConfigured(gpu)
}

// decoded notes a decode that succeeded: the decoder is open; a retry's GPU decoder has
// replaced the CPU's for good.
func (l *decodeLoop) decoded() {
	l.opened, l.openFails = true, 0
	if l.spare != nil {
		l.spare.close()
		l.spare = nil
		l.cam.log.Info("the GPU decoder opened: decoding on it again", "decoder", l.cam.Decoder)
	}
}
