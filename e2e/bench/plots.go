package bench

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// systemColors keep each system's colour the same in every plot.
var systemColors = map[string]color.Color{
	"fleetq": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"kueue":  color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"direct": color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
}

// plot draws a scenario's three figures: the submit→running CDF (every run pooled), and the first
// run's pending workloads and quota utilisation over time.
func (r *Report) plot(dir string, s *Scenario) error {
	cdf := plot.New()
	cdf.Title.Text = s.Name + ": submit → running (all runs)"
	cdf.X.Label.Text = "seconds"
	cdf.Y.Label.Text = "fraction of workloads"
	pending := plot.New()
	pending.Title.Text = s.Name + ": pending workloads (first run)"
	pending.X.Label.Text = "seconds since first submission"
	pending.Y.Label.Text = "submitted, not admitted"
	util := plot.New()
	util.Title.Text = s.Name + ": quota in use (first run)"
	util.X.Label.Text = "seconds since first submission"
	util.Y.Label.Text = fmt.Sprintf("%% of %s held", s.mainResource())
	for _, sys := range r.systems() {
		runs := r.results(s.Name, sys)
		if len(runs) == 0 {
			continue
		}
		var lat []float64
		for _, res := range runs {
			for _, rec := range res.Records {
				if !rec.Running.IsZero() {
					lat = append(lat, rec.Running.Sub(rec.Submitted).Seconds())
				}
			}
		}
		sort.Float64s(lat)
		pts := make(plotter.XYs, len(lat))
		for i, v := range lat {
			pts[i] = plotter.XY{X: v, Y: float64(i+1) / float64(len(lat))}
		}
		if err := addLine(cdf, sys, pts); err != nil {
			return err
		}
		if !holdsQuota(runs[0]) {
			continue // no queue (direct): nothing pends, nothing holds quota
		}
		tl := Timeline(runs[0], runs[0].Capacity, time.Second/2)
		pp, up := make(plotter.XYs, len(tl.T)), make(plotter.XYs, len(tl.T))
		for i := range tl.T {
			pp[i] = plotter.XY{X: tl.T[i], Y: tl.Pending[i]}
			up[i] = plotter.XY{X: tl.T[i], Y: tl.Utilisation[i]}
		}
		if err := addLine(pending, sys, pp); err != nil {
			return err
		}
		if err := addLine(util, sys, up); err != nil {
			return err
		}
	}
	for name, p := range map[string]*plot.Plot{"cdf": cdf, "pending": pending, "utilisation": util} {
		p.Legend.Top = true
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, fmt.Sprintf("%s-%s.png", s.Name, name))); err != nil {
			return fmt.Errorf("plot %s %s: %w", s.Name, name, err)
		}
	}
	return nil
}

func addLine(p *plot.Plot, system string, pts plotter.XYs) error {
	if len(pts) == 0 {
		return nil
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("plot %s: %w", system, err)
	}
	if c, ok := systemColors[system]; ok {
		l.Color = c
	}
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(system, l)
	return nil
}
