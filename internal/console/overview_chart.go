package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/inbox"
	"github.com/webhook-inbox/webhook-inbox/shared/operations"
)

// The overview's charts: inline SVG written here, on the server, from the
// counts the API gives (operations.Charts), so the console stays without
// script. Colours are classes of the style sheet (the CSP, default-src
// 'self', blocks style attributes; SVG presentation attributes are not
// needed), and every text is escaped.

// series is one line or one layer of a chart: a value per bucket.
type series struct {
	Name string
	// Class colours it (a class of console.css: s-accepted, s-c0...).
	Class  string
	Values []int64
}

// Total is the series' sum over the window.
func (s series) Total() int64 {
	var n int64
	for _, v := range s.Values {
		n += v
	}
	return n
}

// chart is one chart of the overview.
type chart struct {
	ID, Title string
	// Note says what the counts are, under the chart.
	Note string
	// Since and Until bound the buckets, each Width long.
	Since, Until time.Time
	Width        time.Duration
	Series       []series
	// Stacked draws bars, each series on the ones before it; else lines.
	Stacked bool
}

// maxCauseSeries is how many refusal causes the received chart draws as
// layers of their own; the rest are one layer, "other causes".
const maxCauseSeries = 6

// receivedChart stacks the refusals, by cause, on the events accepted.
func receivedChart(c *operations.Charts) chart {
	n := bucketsOf(c)
	accepted := series{Name: "accepted", Class: "s-accepted", Values: fit(c.Accepted, n)}
	return chart{ID: "chart-received", Title: "Received: accepted and refused, by cause", Since: c.Since, Until: c.Until, Width: c.Width(), Stacked: true,
		Series: append([]series{accepted}, causeSeries(c.Refused, n)...),
		Note: "Accepted counts the events stored (a duplicate delivery is not stored and is not counted here: the receiver counts duplicates in its Duplicate metric only). " +
			"Refusals come from the receiver's sample of recent refusals (webhook_rejections): each record counts with the refusals of its source and cause it stood for (suppressed), in the record's bucket."}
}

// processingChart draws the attempts by outcome, as lines.
func processingChart(c *operations.Charts) chart {
	n := bucketsOf(c)
	return chart{ID: "chart-processing", Title: "Processing: attempts by outcome", Since: c.Since, Until: c.Until, Width: c.Width(),
		Series: []series{
			{Name: "processed", Class: "s-processed", Values: fit(c.Processed, n)},
			{Name: "failed", Class: "s-failed", Values: fit(c.Failed, n)},
			{Name: "dead-lettered", Class: "s-dead", Values: fit(c.DeadLettered, n)},
		},
		Note: "Attempts by the time they finished: processed (handled, or no handler), failed (to be retried or, on the last attempt, dead-lettered, counted again as dead-lettered). A replay or a requeue processes an event again."}
}

// causeSeries is a layer per refusal cause, largest first (as the API
// orders them); beyond maxCauseSeries the smallest are one layer.
func causeSeries(causes []operations.CauseSeries, n int) []series {
	var out []series
	for i, c := range causes {
		if i == maxCauseSeries && len(causes) > maxCauseSeries+1 {
			other := series{Name: "refused: other causes", Class: "s-other", Values: make([]int64, n)}
			for _, c := range causes[i:] {
				for j, v := range fit(c.Values, n) {
					other.Values[j] += v
				}
			}
			return append(out, other)
		}
		out = append(out, series{Name: "refused: " + string(c.Cause), Class: "s-c" + string(rune('0'+i)), Values: fit(c.Values, n)})
	}
	return out
}

// bucketsOf is how many buckets the charts have.
func bucketsOf(c *operations.Charts) int {
	if c.Width() <= 0 {
		return 0
	}
	return int(c.Until.Sub(c.Since) / c.Width())
}

// fit is values, one per bucket: a series the API sent short (it never
// should) draws as zeros rather than failing the page.
func fit(values []int64, n int) []int64 {
	if len(values) == n {
		return values
	}
	out := make([]int64, n)
	copy(out, values)
	return out
}

// buckets is how many buckets the chart has.
func (c chart) buckets() int {
	if c.Width <= 0 {
		return 0
	}
	return int(c.Until.Sub(c.Since) / c.Width)
}

// The drawing's geometry, in the viewBox's units.
const (
	chartW, chartH                = 760.0, 220.0
	padL, padR, padTop, padBottom = 48.0, 12.0, 10.0, 26.0
)

// SVG draws the chart: axes with labels, bars or lines, and a <title> on
// each bar or point, which a browser shows on hover.
func (c chart) SVG() template.HTML {
	n := c.buckets()
	if n == 0 {
		return ""
	}
	top := c.max()
	yMax := niceCeil(top)
	plotW, plotH := chartW-padL-padR, chartH-padTop-padBottom
	slot := plotW / float64(n)
	x := func(i int) float64 { return padL + slot*float64(i) }
	y := func(v int64) float64 { return padTop + plotH - plotH*float64(v)/float64(yMax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="%s" viewBox="0 0 %g %g" role="img" aria-labelledby="%s-title">`, esc(c.ID), chartW, chartH, esc(c.ID))
	fmt.Fprintf(&b, `<title id="%s-title">%s</title>`, esc(c.ID), esc(c.Title))
	// The y axis: 0, half and the top, with grid lines.
	ticks := []int64{0, yMax}
	if yMax >= 2 && yMax%2 == 0 {
		ticks = []int64{0, yMax / 2, yMax}
	}
	for _, v := range ticks {
		fmt.Fprintf(&b, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/>`, padL, y(v), chartW-padR, y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%g" y="%.1f" text-anchor="end">%s</text>`, padL-6, y(v)+4, esc(short(v)))
	}
	// The x axis: a label every few buckets, at the bucket's start.
	every := max(1, n/6)
	for i := 0; i < n; i += every {
		at := c.Since.Add(time.Duration(i) * c.Width)
		fmt.Fprintf(&b, `<line class="axis" x1="%.1f" y1="%g" x2="%.1f" y2="%g"/>`, x(i), padTop+plotH, x(i), padTop+plotH+4)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%g" text-anchor="middle">%s</text>`, x(i), chartH-8, esc(c.tickLabel(at)))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%g" y1="%g" x2="%g" y2="%g"/>`, padL, padTop+plotH, chartW-padR, padTop+plotH)
	if c.Stacked {
		for i := range n {
			var base int64
			for _, s := range c.Series {
				v := s.Values[i]
				if v == 0 {
					continue
				}
				y0, y1 := y(base), y(base+v)
				fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d, %s</title></rect>`,
					esc(s.Class), x(i)+slot*0.1, y1, slot*0.8, y0-y1, esc(s.Name), v, esc(c.bucketLabel(i)))
				base += v
			}
		}
	} else {
		for _, s := range c.Series {
			var pts strings.Builder
			for i := range n {
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(i)+slot/2, y(s.Values[i]))
			}
			fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, esc(s.Class), strings.TrimSpace(pts.String()))
			for i := range n {
				if s.Values[i] == 0 {
					continue
				}
				fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="2.5"><title>%s: %d, %s</title></circle>`,
					esc(s.Class), x(i)+slot/2, y(s.Values[i]), esc(s.Name), s.Values[i], esc(c.bucketLabel(i)))
			}
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text above is escaped
}

// max is the tallest bar (stacked) or point (lines).
func (c chart) max() int64 {
	var top int64
	for i := range c.buckets() {
		var sum int64
		for _, s := range c.Series {
			if c.Stacked {
				sum += s.Values[i]
			} else {
				sum = max(sum, s.Values[i])
			}
		}
		top = max(top, sum)
	}
	return top
}

// niceCeil is the axis' top: 1, 2 or 5 times a power of ten, at least v
// (and at least 1, so an empty chart still has an axis).
func niceCeil(v int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= v {
				return m * p
			}
		}
	}
}

// short writes an axis tick's count: as is below 10,000 (950, 5000), in
// thousands below a million (20k, 12.5k), in millions from there (3M,
// 1.5M). The ticks are round numbers (niceCeil), so the fractions are
// short.
func short(v int64) string {
	switch {
	case v >= 1_000_000:
		return strconv.FormatFloat(float64(v)/1e6, 'f', -1, 64) + "M"
	case v >= 10_000:
		return strconv.FormatFloat(float64(v)/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatInt(v, 10)
}

// tickLabel is a bucket's start on the x axis: the time of day, with the
// date when buckets are a day or more, UTC.
func (c chart) tickLabel(at time.Time) string {
	if c.Width >= 24*time.Hour {
		return at.UTC().Format("Jan 2")
	}
	if c.Until.Sub(c.Since) > 24*time.Hour {
		return at.UTC().Format("Jan 2 15:04")
	}
	return at.UTC().Format("15:04")
}

// bucketLabel names bucket i in a tooltip: its start and end, UTC.
func (c chart) bucketLabel(i int) string {
	from := c.Since.Add(time.Duration(i) * c.Width).UTC()
	return from.Format("2006-01-02 15:04") + "–" + from.Add(c.Width).Format("15:04") + " UTC"
}

// esc escapes text for the SVG: control characters and bidi overrides as
// the console's clean does, then HTML.
func esc(s string) string { return template.HTMLEscapeString(inbox.EscapeControls(s, "")) }
