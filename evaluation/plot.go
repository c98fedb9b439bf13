package evaluation

import (
	"fmt"
	"math"

	"rgcpred/base/plot"
)

// Plot draws r's models as a 2 x 2 grid of charts, one per metric, the
// models named along the x axis: each model's 95% bootstrap CI a vertical
// bar and its IQM over cells a point on it.
func (r *Report) Plot() *plot.Grid {
	g := &plot.Grid{Cols: 2}
	names := make([]string, len(r.Models))
	for j, m := range r.Models {
		names[j] = m.Name
	}
	for _, name := range MetricNames {
		unit := "" // the spike-train metrics are dimensionless
		if name == "nll" {
			unit = " (nats)"
		}
		ci := plot.Series{Name: "95% bootstrap CI"}
		iqm := plot.Series{Name: "IQM over cells", Points: true}
		for j, m := range r.Models {
			s := m.Summary[name]
			x := float64(j)
			ci.X = append(ci.X, x, x, math.NaN())
			ci.Y = append(ci.Y, s.Lo, s.Hi, math.NaN())
			iqm.X, iqm.Y = append(iqm.X, x), append(iqm.Y, s.IQM)
		}
		g.Charts = append(g.Charts, plot.Chart{Title: MetricTitles[name], XLabel: "model", YLabel: "IQM over cells" + unit,
			XNames: names, Series: []plot.Series{ci, iqm}})
	}
	return g
}

// WritePlot writes r's plot (Report.Plot) to path, as SVG or PNG following
// its extension (.svg or .png).
func WritePlot(path string, r *Report) error {
	if err := r.Plot().Save(path); err != nil {
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	return nil
}
