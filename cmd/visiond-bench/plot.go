package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// A small line plotter: panels stacked vertically sharing the x axis, each with its own y
// axis from 0, ticks, a legend and optional vertical marker lines.

type series struct {
	name string
	x, y []float64
	col  color.RGBA
}

type panel struct {
	ylabel string
	series []series
	marks  []float64 // x positions of vertical marker lines
	mark   string    // what the marker lines are, for the legend
}

var colorGray = color.RGBA{120, 120, 120, 255}

var palette = []color.RGBA{
	{31, 119, 180, 255}, {214, 39, 40, 255}, {44, 160, 44, 255}, {255, 127, 14, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {23, 190, 207, 255},
}

const (
	plotW        = 1000
	panelH       = 300
	marginL      = 70
	marginR      = 20
	marginT      = 28
	marginB      = 36
	titleH       = 26
	charW, lineH = 7, 13
)

// niceStep is a 1, 2 or 5 times a power of ten step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v, step float64) string {
	if step >= 1 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	d := int(math.Ceil(-math.Log10(step)))
	return strconv.FormatFloat(v, 'f', d, 64)
}

type canvas struct {
	img *image.RGBA
	d   *font.Drawer
}

func (c *canvas) text(x, y int, s string, col color.Color) {
	c.d.Src = image.NewUniform(col)
	c.d.Dot = fixed.P(x, y)
	c.d.DrawString(s)
}

func (c *canvas) line(x0, y0, x1, y1 int, col color.Color, width int) {
	dx, dy := iabs(x1-x0), -iabs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		for i := range width {
			for j := range width {
				c.img.Set(x0+i-width/2, y0+j-width/2, col)
			}
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func iabs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// plot draws the panels to a PNG at path.
func plot(path, title, xlabel string, xmax float64, panels []panel) error {
	h := titleH + len(panels)*panelH
	img := image.NewRGBA(image.Rect(0, 0, plotW, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	c := &canvas{img: img, d: &font.Drawer{Dst: img, Face: basicfont.Face7x13}}
	black, grid, gray := color.RGBA{0, 0, 0, 255}, color.RGBA{225, 225, 225, 255}, color.RGBA{90, 90, 90, 255}
	c.text((plotW-len(title)*charW)/2, 18, title, black)
	if xmax <= 0 {
		xmax = 1
	}
	xstep := niceStep(xmax, 10)
	for pi, p := range panels {
		top := titleH + pi*panelH + marginT
		bottom := titleH + (pi+1)*panelH - marginB
		left, right := marginL, plotW-marginR
		ymax := 0.0
		for _, s := range p.series {
			for _, y := range s.y {
				if !math.IsNaN(y) {
					ymax = math.Max(ymax, y)
				}
			}
		}
		ystep := niceStep(ymax*1.1, 5)
		ytop := math.Max(ystep, math.Ceil(ymax*1.1/ystep)*ystep)
		px := func(x float64) int { return left + int(math.Round(x/xmax*float64(right-left))) }
		py := func(y float64) int { return bottom - int(math.Round(y/ytop*float64(bottom-top))) }
		// grid and ticks
		for y := 0.0; y <= ytop+ystep/2; y += ystep {
			c.line(left, py(y), right, py(y), grid, 1)
			s := fmtTick(y, ystep)
			c.text(left-6-len(s)*charW, py(y)+4, s, gray)
		}
		for x := 0.0; x <= xmax+xstep/2; x += xstep {
			if x > xmax {
				break
			}
			c.line(px(x), top, px(x), bottom, grid, 1)
			s := fmtTick(x, xstep)
			c.text(px(x)-len(s)*charW/2, bottom+15, s, gray)
		}
		for _, m := range p.marks {
			for y := top; y < bottom; y += 6 {
				c.line(px(m), y, px(m), min(bottom, y+2), color.RGBA{170, 170, 170, 255}, 1)
			}
		}
		c.line(left, top, left, bottom, black, 1)
		c.line(left, bottom, right, bottom, black, 1)
		c.line(left, top, right, top, black, 1)
		c.line(right, top, right, bottom, black, 1)
		c.text(left, top-8, p.ylabel, black)
		if pi == len(panels)-1 {
			c.text((left+right-len(xlabel)*charW)/2, bottom+30, xlabel, black)
		}
		// series
		for _, s := range p.series {
			prevOK := false
			var x0, y0 int
			for i := range s.x {
				if i >= len(s.y) || math.IsNaN(s.y[i]) {
					prevOK = false
					continue
				}
				x1, y1 := px(s.x[i]), py(s.y[i])
				if prevOK {
					c.line(x0, y0, x1, y1, s.col, 2)
				} else {
					c.line(x1, y1, x1, y1, s.col, 3)
				}
				x0, y0, prevOK = x1, y1, true
			}
		}
		// legend: top right in one row, or, when that would not fit beside the label, one
		// entry a line inside the panel's top left corner on a white ground
		entries := p.series
		if p.mark != "" {
			entries = append(entries, series{name: p.mark, col: color.RGBA{170, 170, 170, 255}})
		}
		width, widest := 0, 0
		for _, e := range entries {
			width += len(e.name)*charW + 26
			widest = max(widest, len(e.name)*charW+26)
		}
		if width <= right-left-len(p.ylabel)*charW-20 {
			lx := right - 10
			for i := len(entries) - 1; i >= 0; i-- {
				e := entries[i]
				lx -= len(e.name)*charW + 26
				c.line(lx, top-12, lx+16, top-12, e.col, 3)
				c.text(lx+20, top-8, e.name, black)
			}
		} else {
			box := image.Rect(left+6, top+6, left+12+widest, top+10+len(entries)*(lineH+3))
			draw.Draw(img, box, image.White, image.Point{}, draw.Src)
			for i, e := range entries {
				y := top + 8 + (i+1)*(lineH+3)
				c.line(left+10, y-4, left+26, y-4, e.col, 3)
				c.text(left+30, y, e.name, black)
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plotSoak draws the soak's memory (daemon, each worker, GPU memory per worker when any),
// latency (p50, p99 of each interval), load, and what the daemon holds besides memory
// (goroutines, open files, the state directory's disk) over time, with the config edits marked.
func plotSoak(path, title string, r soakResult) error {
	unit, div := "s", 1.0
	if r.DurationS > 300 {
		unit, div = "min", 60
	}
	var ts []float64
	for _, s := range r.Samples {
		ts = append(ts, s.T/div)
	}
	mem := panel{ylabel: "resident memory (MiB)", mark: "config edit"}
	daemonY := make([]float64, len(r.Samples))
	nw, gpu := 0, false
	for i, s := range r.Samples {
		daemonY[i] = s.DaemonMiB
		nw = max(nw, len(s.WorkerMiB))
		for _, g := range s.WorkerGPU {
			gpu = gpu || g > 0
		}
	}
	mem.series = append(mem.series, series{name: "daemon", x: ts, y: daemonY, col: palette[0]})
	heapY := make([]float64, len(r.Samples))
	for i, s := range r.Samples {
		heapY[i] = s.HeapMiB
		if s.HeapMiB == 0 {
			heapY[i] = math.NaN()
		}
	}
	mem.series = append(mem.series, series{name: "daemon Go heap", x: ts, y: heapY, col: palette[7]})
	for w := range nw {
		y, g := make([]float64, len(r.Samples)), make([]float64, len(r.Samples))
		for i, s := range r.Samples {
			y[i], g[i] = math.NaN(), math.NaN()
			if w < len(s.WorkerMiB) {
				y[i], g[i] = s.WorkerMiB[w], s.WorkerGPU[w]
			}
		}
		mem.series = append(mem.series, series{name: fmt.Sprintf("worker %d", w), x: ts, y: y, col: palette[(1+w)%len(palette)]})
		if gpu {
			mem.series = append(mem.series, series{name: fmt.Sprintf("worker %d GPU", w), x: ts, y: g, col: palette[(1+nw+w)%len(palette)]})
		}
	}
	lat := panel{ylabel: "capture-to-publish latency per interval (ms)", mark: "config edit"}
	p50, p99, cams := make([]float64, len(r.Samples)), make([]float64, len(r.Samples)), make([]float64, len(r.Samples))
	for i, s := range r.Samples {
		p50[i], p99[i], cams[i] = s.P50, s.P99, float64(s.Online)
		if s.EventsPS == 0 {
			p50[i], p99[i] = math.NaN(), math.NaN()
		}
	}
	lat.series = []series{{name: "p50", x: ts, y: p50, col: palette[2]}, {name: "p99", x: ts, y: p99, col: palette[1]}}
	load := panel{ylabel: "cameras, events/s, host load", mark: "config edit"}
	eps, la := make([]float64, len(r.Samples)), make([]float64, len(r.Samples))
	for i, s := range r.Samples {
		eps[i], la[i] = s.EventsPS, s.Load1
	}
	load.series = []series{{name: "cameras online", x: ts, y: cams, col: palette[4]}, {name: "events/s", x: ts, y: eps, col: palette[3]},
		{name: "load average (1 min)", x: ts, y: la, col: palette[5]}}
	held := panel{ylabel: "goroutines, open files, state directory (MiB)", mark: "config edit"}
	gor, files, disk := make([]float64, len(r.Samples)), make([]float64, len(r.Samples)), make([]float64, len(r.Samples))
	for i, s := range r.Samples {
		gor[i], files[i], disk[i] = s.Goroutines, float64(s.OpenFiles), s.DiskMiB
	}
	held.series = []series{{name: "daemon goroutines", x: ts, y: gor, col: palette[6]}, {name: "open files", x: ts, y: files, col: palette[0]},
		{name: "state directory", x: ts, y: disk, col: palette[3]}}
	for _, e := range r.Edits {
		for _, p := range []*panel{&mem, &lat, &load, &held} {
			p.marks = append(p.marks, e.T/div)
		}
	}
	if title == "" {
		title = fmt.Sprintf("visiond soak: %d+%d cameras at %g fps, %s %s worker(s), config edited every %.0f s",
			r.Base, r.Churn, r.Daemon.FPS, r.Daemon.Workers.describe(0), r.Daemon.Provider, r.EditEveryS)
	}
	return plot(path, title, "time since start ("+unit+")", r.DurationS/div, []panel{mem, lat, load, held})
}
